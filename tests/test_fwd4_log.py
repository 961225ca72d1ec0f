"""The discovery log's writer woken once per batch, and no record lost on the way out.

Records are held in memory and written by the log's thread in batches (``GATHER_S`` after
the first record of a batch); what is held is written by ``flush``, a reader, ``close``,
the interpreter's exit and the MCP gateway's SIGTERM. A call answered by the MCP fast path
hands its record over once its answer went (``gateway/afterreply.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from _mcp_kit import APP
from fork_kit import toolscout as fork_toolscout
from fork_kit import upstream as forked
from support import embedder, spec
from toolscout import DryRunExecutor, Principal, Settings, Toolscout
from toolscout.gateway.afterreply import AFTER_REPLY, AfterReply
from toolscout.telemetry.log import WRITE_BATCH, DiscoveryLog

SRC = str(Path(__file__).resolve().parents[1] / "src")
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _count(path: Path, table: str = "calls") -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        con.close()


def _record(log: DiscoveryLog, n: int, tag: str) -> None:
    for i in range(n):
        log.record_call(f"{tag}.{i}", discovery_id=None, ok=True, subject="s", tenant="t")


def test_no_record_is_lost_on_close_while_threads_write(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    log = DiscoveryLog(path)
    threads = [threading.Thread(target=_record, args=(log, 700, f"t{k}")) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.record_discovery("s", "t", "the last one", ["a"], 0.9, 1.0)
    log.close()  # at once: nothing is written yet but what a full batch forced
    assert _count(path) == 2100 and _count(path, "discoveries") == 1
    ids = {r[0] for r in sqlite3.connect(path).execute("SELECT tool_id FROM calls")}
    assert ids == {f"t{k}.{i}" for k in range(3) for i in range(700)}


def test_a_record_after_close_is_dropped_without_a_thread(tmp_path: Path) -> None:
    log = DiscoveryLog(tmp_path / "log.db")
    _record(log, 1, "x")
    log.close()
    _record(log, 1, "y")  # nowhere to write it: no writer is started again
    assert log._thread is None
    log.close()  # twice is harmless
    assert _count(tmp_path / "log.db") == 1


def test_the_writer_is_woken_once_per_batch_and_writes_it_in_one_transaction(
    tmp_path: Path,
) -> None:
    log = DiscoveryLog(tmp_path / "log.db")
    wakes: list[bool] = []
    batches: list[int] = []
    wake_set, write = log._wake.set, log._write

    def counted_set() -> None:
        wakes.append(True)
        wake_set()

    def counted_write(items: Any) -> None:
        batches.append(len(items))
        write(items)

    log._wake.set = counted_set  # type: ignore[method-assign]
    log._write = counted_write  # type: ignore[method-assign]
    with log._lock:  # the writer cannot take anything while the records come in
        _record(log, 120, "a")
    log.flush()
    assert wakes == [True]  # the first record woke it; the other 119 did not
    assert batches == [120]
    with log._lock:
        _record(log, WRITE_BATCH + 10, "b")
    log.flush()
    assert batches[1:] == [WRITE_BATCH, 10]  # a transaction holds WRITE_BATCH at most
    assert _count(tmp_path / "log.db") == 120 + WRITE_BATCH + 10
    log.close()


def test_a_discovery_another_process_still_holds_is_found_by_a_linked_call(
    tmp_path: Path,
) -> None:
    """Records gather for ``GATHER_S`` before they are written, and the call or feedback
    that links to a discovery may come to another HTTP worker or replica at once (which
    answers 404 for a discovery it cannot find): ``owner`` looks again for a while."""
    path = tmp_path / "log.db"
    writer, reader = DiscoveryLog(path), DiscoveryLog(path)  # two processes' connections
    try:
        did = writer.record_discovery("alice", "acme", "refund my order", ["a"], 0.9, 1.0)
        assert reader.owner(did) == ("alice", "acme")
        started = time.monotonic()
        assert reader.owner("0" * 32) is None  # no process wrote it: a bounded wait
        assert time.monotonic() - started < 10 * DiscoveryLog.owner_wait_s
    finally:
        writer.close()
        reader.close()


def test_the_log_commits_as_the_store_and_the_audit_log_do(tmp_path: Path) -> None:
    log = DiscoveryLog(tmp_path / "log.db")
    assert log._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL: no fsync a batch
    log.close()


def _child(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path / "log.db")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_what_is_held_is_written_when_the_process_exits_without_close(tmp_path: Path) -> None:
    done = _child(
        tmp_path,
        """
        import sys
        from toolscout.telemetry.log import DiscoveryLog
        log = DiscoveryLog(sys.argv[1])
        for i in range(50):
            log.record_call(f"x.{i}", discovery_id=None, ok=True)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert _count(tmp_path / "log.db") == 50


def test_the_gateways_sigterm_writes_what_is_held_before_it_exits(tmp_path: Path) -> None:
    done = _child(
        tmp_path,
        """
        import os, signal, sys
        from toolscout.cli.mcp import _interrupt
        from toolscout.telemetry.log import DiscoveryLog
        signal.signal(signal.SIGTERM, _interrupt)
        log = DiscoveryLog(sys.argv[1])
        for i in range(50):
            log.record_call(f"x.{i}", discovery_id=None, ok=True)
        os.kill(os.getpid(), signal.SIGTERM)
        """,
    )
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert _count(tmp_path / "log.db") == 50


def test_a_fast_path_call_is_logged_once_its_answer_went(tmp_path: Path) -> None:
    settings = Settings(db=tmp_path / "c.db")
    with Toolscout.open(settings, embedder=embedder(), executors=DryRunExecutor()) as ts:
        ts.add([spec("shop.track_parcel", "Track a parcel by its tracking number.")])
        root = Principal.of("root", scopes=["*"])
        log = ts.catalog.log
        assert log is not None

        async def call() -> AfterReply:
            after = AfterReply()
            AFTER_REPLY.set(after)
            result = await ts.aexecute(root, "shop.track_parcel", {})
            assert result.ok, result.to_dict()
            return after

        after = asyncio.run(call())
        assert not log._held and log.events() == []  # held back until the answer went
        after.run()
        assert [(e.tool_id, e.ok) for e in log.events()] == [("shop.track_parcel", True)]
        ts.execute(root, "shop.track_parcel", {})  # no front end answering first: at once
        assert len(log._held) == 1


def test_calls_answered_before_a_sigterm_are_in_the_log(tmp_path: Path) -> None:
    """The gateway over real pipes: six calls (the first opens the connection on the SDK's
    path, the rest on the fast path), SIGTERM right after the last answer; every call but
    possibly the last (its record may not be handed over yet) is in the discovery log."""
    db = tmp_path / "g.db"
    servers = {"app": {**forked(APP, "--stdio"),
                       "toolscout": {"scopes": []}}}  # fmt: skip
    config = tmp_path / "g.json"
    config.write_text(json.dumps({"mcpServers": servers, "toolscout": {
        "mode": "direct", "connect_timeout_s": 60, "principal": {"subject": "dev"},
        "db": str(db), "rate_per_second": 0}}))  # fmt: skip

    async def run() -> int:
        env = {**os.environ, "PYTHONPATH": SRC, "XDG_DATA_HOME": str(tmp_path / "xdg")}
        proc = await asyncio.create_subprocess_exec(
            *fork_toolscout("mcp", "serve", "--config", str(config)),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env=env,
        )  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        try:
            for rid in range(1, 7):
                params = {"name": "echo", "arguments": {"text": f"t{rid}"}, "_meta": ENVELOPE}
                line = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
                proc.stdin.write(json.dumps(line).encode() + b"\n")
                await proc.stdin.drain()
                while True:
                    answer = json.loads(await asyncio.wait_for(proc.stdout.readline(), 120))
                    if answer.get("id") == rid:
                        break
                assert "result" in answer and not answer["result"].get("isError"), answer
            proc.send_signal(signal.SIGTERM)
            return await asyncio.wait_for(proc.wait(), 60)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    assert asyncio.run(run()) == 128 + signal.SIGTERM
    assert _count(db) >= 5
