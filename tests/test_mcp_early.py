"""``toolscout mcp serve`` over stdio answers ``initialize`` from the answer kept at its
last start while it loads, exactly once, and the SDK's session is initialised as usual.

Driven over a real pipe with raw JSON-RPC lines (the SDK client would hide a second
answer to ``initialize``)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from _mcp_kit import py_server
from toolscout.mcp.early import _option, answer_key, answers_path, begin, shared_key

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "1"},
    },
}
WAIT_S = 120.0


def _config(tmp: Path, **gateway: Any) -> Path:
    path = tmp / "servers.json"
    servers = {"time": {"command": py_server("mcp-server-time"), "toolscout": {"scopes": ["t"]}}}
    principal = {"subject": "me", "scopes": ["t"]}
    path.write_text(
        json.dumps({"mcpServers": servers, "toolscout": {"principal": principal, **gateway}})
    )
    return path


def _session(config: Path, db: Path) -> tuple[list[dict[str, Any]], str]:
    """One client session: initialize, initialized, tools/list; every message the gateway
    wrote until its stdout closed, and its stderr. (Answers any start keeps are kept in a
    cache dir of the test's own, beside the config.)"""
    cache = str(config.parent / "cache")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "XDG_CACHE_HOME": cache}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolscout", "mcp", "serve", "-c", str(config), "--db", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    lines: queue.Queue[bytes] = queue.Queue()
    out = proc.stdout

    def pump() -> None:
        for line in out:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    got: list[dict[str, Any]] = []

    def until(wanted: int) -> None:
        while not any(m.get("id") == wanted for m in got):
            got.append(json.loads(lines.get(timeout=WAIT_S)))

    try:
        proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        proc.stdin.flush()
        until(1)
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        proc.stdin.write((json.dumps(note) + "\n" + json.dumps(listing) + "\n").encode())
        proc.stdin.flush()
        until(2)
        proc.stdin.close()
        proc.wait(timeout=WAIT_S)
        while True:  # whatever else it wrote before its stdout closed
            try:
                got.append(json.loads(lines.get(timeout=1.0)))
            except queue.Empty:
                break
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    return got, err


def _answers(got: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["result"] for m in got if m.get("id") == 1]


def test_the_second_start_answers_from_the_kept_answer_once(tmp_path: Path) -> None:
    config, db = _config(tmp_path), tmp_path / "c.db"
    kept = answers_path(config, ["-c", str(config), "--db", str(db)])
    assert kept == tmp_path / "c.db.initialize.json"  # beside the catalog it names
    first, _ = _session(config, db)
    (sdk,) = _answers(first)  # a first start: answered by the SDK, and kept
    assert sdk["serverInfo"]["name"] == "toolscout" and "tools" in sdk["capabilities"]
    assert json.loads(kept.read_text())["answers"] == {"2025-06-18": sdk}
    # a planted answer under the right key proves the next start answers from the file
    data = json.loads(kept.read_text())
    planted = {**sdk, "instructions": "kept from the last start"}
    kept.write_text(json.dumps({**data, "answers": {"2025-06-18": planted}}))
    second, err = _session(config, db)
    assert _answers(second) == [planted]  # answered early, and only once
    assert any(m.get("id") == 2 and "tools" in m["result"] for m in second)  # SDK initialised
    assert "differs from this one's" in err
    third, err = _session(config, db)
    assert _answers(third) == [sdk]  # the difference was kept for the next start
    assert "differs" not in err


def test_another_config_or_a_damaged_file_is_answered_by_the_sdk(tmp_path: Path) -> None:
    config, db = _config(tmp_path), tmp_path / "c.db"
    (sdk,) = _answers(_session(config, db)[0])
    kept = tmp_path / "c.db.initialize.json"
    planted = {**sdk, "instructions": "stale"}
    data = json.loads(kept.read_text())
    kept.write_text(json.dumps({**data, "answers": {"2025-06-18": planted}}))
    _config(tmp_path, mode="meta")  # the config changed: its key no longer matches
    (changed,) = _answers(_session(config, db)[0])
    assert changed != planted and changed["instructions"] != "stale"
    for damaged in ("not json", "[]", json.dumps({"key": data["key"], "answers": {"x": 1}})):
        kept.write_text(damaged)
        assert _answers(_session(config, db)[0]) == [changed]


def test_only_mcp_serve_over_stdio_with_a_config_reads_ahead(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert begin(["toolscout", "search", "x"]) is None
    assert begin(["toolscout", "mcp", "inspect", "-c", str(config)]) is None
    assert begin(["toolscout", "mcp", "serve", "-c", str(config), "-t", "http"]) is None
    assert begin(["toolscout", "mcp", "serve", "--transport=http", "-c", str(config)]) is None
    assert begin(["toolscout", "mcp", "serve"]) is None  # no config: the command says so
    assert _option(["--config=a.json"], "--config", "-c") == "a.json"
    assert _option(["-c", "b.json"], "--config", "-c") == "b.json"
    # the key moves with the config's bytes and the command's arguments
    key = answer_key(config, ["-c", str(config)])
    assert key == answer_key(config, ["-c", str(config)])
    assert key != answer_key(config, ["-c", str(config), "--mode", "meta"])
    config.write_text(config.read_text().replace('"t"]', '"u"]'))
    assert key != answer_key(config, ["-c", str(config)])


def test_an_answer_telling_of_an_upstream_is_never_kept(tmp_path: Path) -> None:
    """Upstream instructions depend on what the caller may see under the policy of the
    moment: a kept answer would tell of them before the caller is known, so only an
    answer carrying the gateway's own instructions is kept."""
    config, db = _config(tmp_path), tmp_path / "c.db"
    args = ["-c", str(config), "--db", str(db)]
    from toolscout.mcp.early import Early

    early = Early(config, args)
    early.request = INITIALIZE
    result = {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "toolscout", "version": "1"},
        "instructions": "own\n\n[time] the time server's own words",
    }
    early.keep(result, own="own")
    assert not answers_path(config, args).exists()
    early.keep({**result, "instructions": "own"}, own="own")
    kept = json.loads(answers_path(config, args).read_text())
    assert kept["answers"]["2025-06-18"]["instructions"] == "own"


def test_a_first_start_in_the_same_mode_answers_from_the_shared_answer(tmp_path: Path) -> None:
    """A first start of a config (no catalog yet, so no answer beside it) is answered from
    the answer any earlier start of this toolscout kept in the same listing mode, checked
    against the SDK's the same way; another mode is answered by the SDK."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (two / "cache").symlink_to(one / "cache", target_is_directory=True)  # one user's cache
    config = _config(one)
    (sdk,) = _answers(_session(config, one / "c.db")[0])  # kept beside c.db and shared
    shared = list((one / "cache" / "toolscout" / "mcp").glob("initialize-*.json"))
    assert len(shared) == 1 and json.loads(shared[0].read_text())["answers"] == {"2025-06-18": sdk}
    # a planted shared answer proves a first start of another config answers from it
    data = json.loads(shared[0].read_text())
    planted = {**sdk, "instructions": "kept by another config's start"}
    shared[0].write_text(json.dumps({**data, "answers": {"2025-06-18": planted}}))
    other = _config(two, k=3)  # other bytes, the same mode (auto)
    assert answer_key(other, ["-c", str(other)]) != answer_key(config, ["-c", str(config)])
    assert shared_key(other, ["-c", str(other)]) == shared_key(config, ["-c", str(config)])
    got, err = _session(other, two / "c.db")
    assert _answers(got) == [planted]  # answered early, once
    assert any(m.get("id") == 2 and "tools" in m["result"] for m in got)
    assert "differs from this one's" in err
    assert json.loads(shared[0].read_text())["answers"] == {"2025-06-18": sdk}  # corrected
    # another mode: its own key, answered by the SDK (and kept under that key)
    meta = _config(two, mode="meta")
    assert shared_key(meta, ["-c", str(meta)]) != shared_key(config, ["-c", str(config)])
    assert shared_key(config, ["-c", str(config), "--mode", "meta"]) == shared_key(
        meta, ["-c", str(meta)]
    )
    (answered,) = _answers(_session(meta, two / "m.db")[0])
    assert answered["instructions"] != sdk["instructions"]
    assert len(list((one / "cache" / "toolscout" / "mcp").glob("initialize-*.json"))) == 2
    assert shared_key(tmp_path / "missing.json", []) is None  # the command says what is wrong
