"""The forwarding path's turns of the event loop and store reads (round nine, h/fwd3).

* an upstream's answer to the gateway's own request is taken off its stdout pipe as the
  bytes arrive (``mcp/leantap.py``), never ahead of a line the upstream wrote before it;
* the gateway's own request goes straight onto the upstream's stdin (``lean._send_line``);
* a call's waiting request wakes on the loop's next turn when the call ends (``rounds``);
* the catalog's generation read is shared within one turn of the loop when the catalog
  says so, and a change another process commits is seen on the next turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support import embedder
from toolscout.discovery.catalog import Catalog
from toolscout.mcp.lean import PREFIX, LeanStdio, _send_line
from toolscout.mcp.leantap import Tap
from toolscout.mcp.relay import Link
from toolscout.mcp.rounds import Rounds
from toolscout.policy import PolicyConfig, Principal
from toolscout.stores.sqlite import SQLiteStore

SRC = Path(__file__).resolve().parents[1] / "src"


# -- the tap on an upstream's stdout ------------------------------------------------------
class Recorder:
    """The protocol the tap passes lines on to (the SDK's side): what reached it."""

    def __init__(self) -> None:
        self.data = b""
        self.eof = False
        self.lost: list[Exception | None] = []

    def data_received(self, data: bytes) -> None:
        self.data += data

    def eof_received(self) -> bool | None:
        self.eof = True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)


def _answer(rid: str, text: str = "ok") -> bytes:
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode() + b"\n"


def _note(text: str) -> bytes:
    params = {"level": "info", "data": text}
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
    return json.dumps(note).encode() + b"\n"


def _progress(token: str) -> bytes:
    params = {"progressToken": token, "progress": 1}
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
    return json.dumps(note).encode() + b"\n"


async def _tapped(*rids: str) -> tuple[LeanStdio, Tap, Recorder, dict[str, asyncio.Future[Any]]]:
    lean = LeanStdio(None, sys.stderr)
    futures = {rid: asyncio.get_running_loop().create_future() for rid in rids}
    for rid, future in futures.items():
        lean._pending[rid] = (future, None)
    inner = Recorder()
    return lean, Tap(inner, lean, "utf-8", "strict"), inner, futures


def test_the_tap_takes_an_own_answer_as_it_arrives_and_passes_the_rest_on() -> None:
    async def run() -> None:
        one, two = f"{PREFIX}1", f"{PREFIX}2"
        lean, tap, inner, futures = await _tapped(one, two)
        tap.data_received(_answer(one, "first"))
        assert futures[one].result()["result"]["content"][0]["text"] == "first"
        assert inner.data == b"" and lean.fed == 0 and tap.taken == 1
        # an own answer, then the SDK's: the first taken, the rest passed on as it came
        theirs = _answer("7") + _note("after")
        tap.data_received(_answer(two) + theirs)
        assert futures[two].done() and inner.data == theirs and lean.fed == len(theirs)
        tap.eof_received()
        tap.connection_lost(None)
        assert inner.eof and inner.lost == [None]

    asyncio.run(run())


@pytest.mark.parametrize(
    "chunk",
    [
        pytest.param(_note("before") + _answer(f"{PREFIX}1"), id="a line written before it"),
        pytest.param(_answer(f"{PREFIX}1")[:-5], id="a partial line"),
        pytest.param(b"\xff\xfe" + _answer(f"{PREFIX}1"), id="bytes that do not decode"),
        pytest.param(_progress(f"{PREFIX}1"), id="a progress report on its token"),
    ],
)
def test_the_tap_passes_on_what_it_must_not_take(chunk: bytes) -> None:
    """Nothing is taken ahead of a line before it, nor a line that is not a whole answer:
    the reader task routes them in order, as without the tap."""

    async def run() -> None:
        lean, tap, inner, futures = await _tapped(f"{PREFIX}1")
        tap.data_received(chunk)
        assert inner.data == chunk and lean.fed == len(chunk) and tap.taken == 0
        assert not futures[f"{PREFIX}1"].done()

    asyncio.run(run())


def test_the_tap_never_overtakes_bytes_the_reader_has_not_finished() -> None:
    async def run() -> None:
        one = f"{PREFIX}1"
        lean, tap, inner, futures = await _tapped(one)
        tap.data_received(_note("earlier"))  # on its way through the reader task
        tap.data_received(_answer(one))
        assert not futures[one].done() and inner.data == _note("earlier") + _answer(one)
        lean.consumed = lean.fed  # the reader task finished with all of it
        lean._pending[f"{PREFIX}2"] = (asyncio.get_running_loop().create_future(), None)
        tap.data_received(_answer(f"{PREFIX}2"))
        assert lean._pending[f"{PREFIX}2"][0].done() and tap.taken == 1

    asyncio.run(run())


def test_the_end_of_a_line_the_reader_holds_the_start_of_is_not_taken() -> None:
    """A line split across two reads: the second read, on its own, is a whole own answer,
    but the upstream wrote it as the end of another line; it goes to the reader, which
    holds the line's start."""

    async def run() -> None:
        one = f"{PREFIX}1"
        lean, tap, inner, futures = await _tapped(one)
        tap.data_received(b'{"jsonrpc": "2.0", "method": "x", "params": {"note": ')
        lean.consumed = lean.fed  # the reader task read it and holds it, waiting for its end
        tap.data_received(_answer(one))
        assert not futures[one].done() and tap.taken == 0 and inner.data.endswith(_answer(one))
        lean.consumed = lean.fed  # the line ended: the next own answer is taken
        lean._pending[f"{PREFIX}2"] = (asyncio.get_running_loop().create_future(), None)
        tap.data_received(_answer(f"{PREFIX}2"))
        assert lean._pending[f"{PREFIX}2"][0].done() and tap.taken == 1

    asyncio.run(run())


def test_the_tap_sits_on_the_pipe_of_a_process_spawned_as_the_sdk_spawns_it() -> None:
    """A real child process (spawned by the SDK's own helper) writes an answer to an own
    request: the tap installed on its stdout takes it before any reader task runs."""
    from mcp.client import stdio as sdk

    from toolscout.mcp import leantap

    line = _answer(f"{PREFIX}1", "from the child").decode()
    # the child answers only once asked (a line on its stdin), as an upstream does: an
    # answer written before the tap is on goes the usual way, and nothing reads it here
    code = f"import sys; sys.stdin.readline(); sys.stdout.write({line!r}); sys.stdout.flush()"

    async def run() -> None:
        process = await sdk._create_platform_compatible_process(
            command=sys.executable, args=["-c", code], env=dict(os.environ), errlog=sys.stderr
        )
        lean = LeanStdio(None, sys.stderr)
        future = asyncio.get_running_loop().create_future()
        lean._pending[f"{PREFIX}1"] = (future, None)
        tap = leantap.install(process, lean, "utf-8", "strict")
        assert tap is not None
        await process.stdin.send(b"ask\n")
        async with asyncio.timeout(60):
            answer = await future
        assert answer["result"]["content"][0]["text"] == "from the child" and tap.taken == 1
        await process.wait()

    asyncio.run(run())


# -- the own request onto the upstream's stdin ---------------------------------------------
def test_a_request_goes_straight_onto_the_pipe_and_a_closed_pipe_says_so() -> None:
    class NoSend:
        """anyio's wrapper around the asyncio writer, whose ``send`` must not be needed."""

        def __init__(self, stream: asyncio.StreamWriter) -> None:
            self._stream = stream

        async def send(self, data: bytes) -> None:
            raise AssertionError("the line went through anyio's send")

    async def run() -> None:
        loop = asyncio.get_running_loop()
        read_fd, write_fd = os.pipe()
        pipe = os.fdopen(write_fd, "wb", buffering=0)
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), pipe
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        try:
            await _send_line(NoSend(writer), b'{"a":1}\n')
            assert os.read(read_fd, 100) == b'{"a":1}\n'
            writer.close()
            with pytest.raises(BrokenPipeError):
                await _send_line(NoSend(writer), b'{"a":2}\n')
        finally:
            os.close(read_fd)

    asyncio.run(run())


# -- the waiting request of a round ---------------------------------------------------------
def test_a_calls_waiting_request_wakes_on_the_next_turn_of_the_loop() -> None:
    """The call ends on turn N; the request waiting for it carries on at turn N + 1 (a done
    callback would wake it on N + 2: one more turn of the loop per forwarded call)."""

    async def run() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        turns = [0]

        def tick() -> None:
            turns[0] += 1
            loop.call_soon(tick)

        loop.call_soon(tick)
        ended: list[int] = []

        async def call() -> str:
            await asyncio.sleep(0)
            ended.append(turns[0])
            return "done"

        rounds = Rounds()
        result = await rounds.run("caller", Link(None), None, call)
        assert result == "done"
        return ended[0], turns[0]

    ended, resumed = asyncio.run(run())
    assert resumed - ended <= 1, (ended, resumed)


# -- the catalog's generation within one turn ------------------------------------------------
def _generation_reads(store: SQLiteStore) -> list[str]:
    reads: list[str] = []
    store._db.set_trace_callback(
        lambda sql: reads.append(sql) if "key = 'generation'" in sql and "SELECT" in sql else None
    )
    return reads


def _set_policy_elsewhere(path: Path, pinned: str) -> None:
    """Another process stores a policy (a new generation of the catalog)."""
    script = (
        "import json, sys\n"
        "from toolscout.policy import PolicyConfig\n"
        "from toolscout.stores.sqlite import SQLiteStore\n"
        "store = SQLiteStore(sys.argv[1])\n"
        "store.set_meta('policy', json.dumps(PolicyConfig(pinned=(sys.argv[2],)).to_dict()))\n"
        "store.close()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    subprocess.run([sys.executable, "-c", script, str(path), pinned], check=True, env=env)


def test_one_generation_read_serves_a_turn_and_another_processs_change_is_seen_next(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"
    catalog = Catalog(SQLiteStore(path), embedder=embedder())
    catalog.reuse_within_turn = True
    reads = _generation_reads(catalog.store)  # type: ignore[arg-type]
    principal = Principal("someone")

    async def run() -> None:
        await asyncio.sleep(0)
        del reads[:]
        catalog.resolve("x/y")
        catalog.decide(principal, "x/y")
        with catalog.pinned():
            catalog.spec("x/y")
        assert len(reads) == 1, reads  # three reads of a forwarded call: one store read
        # another process changes the policy: its end reaches this loop on a later turn
        await asyncio.to_thread(_set_policy_elsewhere, path, "a/first")
        assert catalog.policy.pinned == ("a/first",)
        # a write through the catalog's own connection, seen within the same turn
        catalog.set_policy(PolicyConfig(pinned=("b/second",)))
        assert catalog.policy.pinned == ("b/second",)

    try:
        asyncio.run(run())
        # no loop running: every read asks the store
        del reads[:]
        catalog.decide(principal, "x/y")
        catalog.decide(principal, "x/y")
        assert len(reads) == 2
        _set_policy_elsewhere(path, "c/third")
        assert catalog.policy.pinned == ("c/third",)
    finally:
        catalog.close()


def test_a_catalog_asks_the_store_every_time_unless_told_otherwise(tmp_path: Path) -> None:
    catalog = Catalog(SQLiteStore(tmp_path / "d.db"), embedder=embedder())
    reads = _generation_reads(catalog.store)  # type: ignore[arg-type]

    async def run() -> None:
        del reads[:]
        catalog.decide(Principal("someone"), "x/y")
        catalog.decide(Principal("someone"), "x/y")
        assert len(reads) == 2

    try:
        asyncio.run(run())
    finally:
        catalog.close()


# -- the caller's lines offered as they arrive ---------------------------------------------
def test_a_line_is_offered_in_the_pipes_callback_while_the_reader_waits() -> None:
    """The reader waits for a line; the bytes of two arrive: the hook is offered each in
    the pipe's own callback (before the reader could run), and only the line it leaves
    reaches the reader."""
    from toolscout.mcp.pipes import PipeLines

    async def run() -> tuple[list[tuple[str, bool]], str]:
        r, w = os.pipe()
        lines = PipeLines(r)
        offered: list[tuple[str, bool]] = []
        reading: list[asyncio.Task[str]] = []

        def hook(line: str) -> bool:
            # the reader task has not run since the bytes came: it is still waiting
            offered.append((line, reading[0].done()))
            return "take" in line

        lines.hook = hook
        try:
            reading.append(asyncio.ensure_future(lines.__anext__()))
            await asyncio.sleep(0.05)  # the pipe is open, the reader waits
            os.write(w, b'{"take": 1}\n{"keep": 2}\n')
            got = await asyncio.wait_for(reading[0], 30)
            lines.close()
            return offered, got
        finally:
            os.close(w)
            os.close(r)

    offered, got = asyncio.run(run())
    assert offered == [('{"take": 1}\n', False), ('{"keep": 2}\n', False)]
    assert got == '{"keep": 2}\n'


def test_lines_that_arrive_while_the_reader_is_busy_are_offered_in_order() -> None:
    from toolscout.mcp.pipes import PipeLines

    async def run() -> tuple[list[str], list[str]]:
        r, w = os.pipe()
        lines = PipeLines(r)
        offered: list[str] = []
        lines.hook = lambda line: offered.append(line.strip()) is None and line.startswith("t")
        try:
            os.write(w, b"k1\nt2\nk3\nt4\n")
            os.close(w)
            w = -1
            got = [line.strip() async for line in lines]  # the reader asks for each in turn
            lines.close()
            return offered, got
        finally:
            if w >= 0:
                os.close(w)
            os.close(r)

    offered, got = asyncio.run(run())
    assert offered == ["k1", "t2", "k3", "t4"] and got == ["k1", "k3"]
