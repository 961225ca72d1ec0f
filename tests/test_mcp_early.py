"""``toolscout mcp serve`` over stdio answers ``initialize`` before the MCP SDK is imported,
with an answer built from the requested protocol version and the listing mode, exactly
once; the SDK's session is initialised as usual and its own answer is compared.

The built answer is held to the real SDK's for every listing mode and every protocol
version the SDK knows (a new SDK that answers differently fails here). The early answer is
driven over a real pipe with raw JSON-RPC lines (the SDK client would hide a second answer
to ``initialize``)."""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from _mcp_kit import forked_py_server
from _mcp_kit import initialize_request as _initialize
from toolscout.mcp import early as early_mod
from toolscout.mcp.config import MODES, load_config
from toolscout.mcp.early import (
    HANDSHAKE_VERSIONS,
    Early,
    Recorder,
    _option,
    begin,
    initialize_result,
    listing_mode,
    own_instructions,
)
from toolscout.mcp.server import MCPGateway

WAIT_S = 120.0


def _config(tmp: Path, **gateway: Any) -> Path:
    path = tmp / "servers.json"
    # the gateway starts cold (what these tests are about); its upstream, the published
    # time server, is forked (fork_kit): a process of its own on the gateway's pipes
    time_server = forked_py_server("mcp-server-time", toolscout={"scopes": ["t"]})
    servers = {"time": time_server}
    principal = {"subject": "me", "scopes": ["t"]}
    path.write_text(
        json.dumps({"mcpServers": servers, "toolscout": {"principal": principal, **gateway}})
    )
    return path


# -- the built answer is the SDK's ----------------------------------------------------


async def _sdk_answers(
    gateway: MCPGateway, messages: list[dict[str, Any]], write: Any = None
) -> list[dict[str, Any]]:
    """``messages`` put to the gateway's SDK server over in-memory streams; what it wrote
    (as the stdio transport dumps it), one answer per request."""
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCNotification, JSONRPCRequest

    send_in, recv_in = anyio.create_memory_object_stream[Any](16)
    send_out, recv_out = anyio.create_memory_object_stream[Any](16)
    out = write(send_out) if write is not None else send_out
    got: list[dict[str, Any]] = []
    wanted = len([m for m in messages if "id" in m]) - (write is not None)
    async with send_in, recv_in, send_out, recv_out, anyio.create_task_group() as tg:
        options = gateway.server.create_initialization_options()
        tg.start_soon(gateway.server.run, recv_in, out, options)
        for message in messages:
            kind = JSONRPCRequest if "id" in message else JSONRPCNotification
            await send_in.send(SessionMessage(kind.model_validate(message)))
        with anyio.fail_after(WAIT_S):
            while len(got) < wanted:
                item = await recv_out.receive()
                got.append(item.message.model_dump(by_alias=True, exclude_unset=True, mode="json"))
        tg.cancel_scope.cancel()
    return got


def _gateway(tmp: Path, mode: str) -> MCPGateway:
    path = tmp / f"{mode}.json"
    section = {"mode": mode, "db": str(tmp / f"{mode}.db"), "principal": {"subject": "me"}}
    path.write_text(json.dumps({"mcpServers": {}, "toolscout": section}))
    return MCPGateway(load_config(path))


@pytest.mark.parametrize("mode", MODES)
def test_the_built_answer_is_the_sdks_for_every_mode_and_version(tmp_path: Path, mode: str) -> None:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, KNOWN_PROTOCOL_VERSIONS

    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS  # what the SDK negotiates
    assert set(MODES) == set(early_mod._MODES)
    gateway = _gateway(tmp_path, mode)
    try:
        # every version the SDK knows (the 2026 era is not reachable through initialize:
        # it is answered with the newest handshake version), and one it does not
        for version in (*KNOWN_PROTOCOL_VERSIONS, "1999-01-01", "next"):
            (answer,) = anyio.run(_sdk_answers, gateway, [_initialize(version)])
            assert answer["result"] == initialize_result(version, mode), (mode, version)
        assert own_instructions(mode) == gateway.instructions()
    finally:
        gateway.close()


def test_a_different_sdk_answer_is_said_and_never_sent_twice(tmp_path: Path) -> None:
    """The SDK's answer stays the truth: with an answer sent early that is not the SDK's
    (as a new SDK's would be), the difference is said on stderr, and the client, already
    answered, is not answered again."""
    gateway = _gateway(tmp_path, "meta")
    errlog = io.StringIO()
    try:
        for sent, said in (
            (initialize_result("2025-06-18", "meta"), False),
            ({**initialize_result("2025-06-18", "meta"), "serverInfo": {"name": "x"}}, True),
        ):
            started = Early("meta")
            started.request, started.sent = _initialize(), sent
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}

            def wrap(stream: Any, started: Early = started) -> Recorder:
                return Recorder(stream, started, errlog, own=gateway.instructions())

            got = anyio.run(_sdk_answers, gateway, [_initialize(), note, listing], wrap)
            assert [m["id"] for m in got] == [2] and "tools" in got[0]["result"]
            assert ("differs from the SDK's" in errlog.getvalue()) is said
    finally:
        gateway.close()


def test_upstream_instructions_are_not_a_difference() -> None:
    own = own_instructions("meta")
    sent = initialize_result("2025-06-18", "meta")
    told = {**sent, "instructions": own + "\n\n[time] the time server's own words"}
    assert early_mod._same(sent, told, own)
    assert not early_mod._same(sent, {**told, "protocolVersion": "2025-03-26"}, own)
    assert not early_mod._same(sent, {**sent, "instructions": "other"}, own)


# -- over a real pipe ---------------------------------------------------------------


def _session(
    config: Path, db: Path, first: dict[str, Any] | None = None
) -> tuple[list[dict[str, Any]], str]:
    """One client session: initialize, initialized, tools/list; every message the gateway
    wrote until its stdout closed, and its stderr (with the start-up timeline)."""
    cache = str(config.parent / "cache")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "XDG_CACHE_HOME": cache,  # an empty user cache: what a first start after install sees
        "TOOLSCOUT_TIMELINE": "1",
    }
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
        proc.stdin.write((json.dumps(first or _initialize()) + "\n").encode())
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
    return [m.get("result", m.get("error", {})) for m in got if m.get("id") == 1]


def test_a_first_start_answers_initialize_early_once_and_keeps_nothing(tmp_path: Path) -> None:
    config, db = _config(tmp_path, mode="dynamic"), tmp_path / "c.db"
    got, err = _session(config, db)
    assert _answers(got) == [initialize_result("2025-06-18", "dynamic")]  # once
    assert any(m.get("id") == 2 and "tools" in m["result"] for m in got)  # SDK initialised
    early_at = err.index("initialize answered early")
    assert early_at < err.index("MCP SDK imported")  # before the SDK was even imported
    assert "differs" not in err
    # no state: neither beside the catalog nor under the user cache dir
    assert not list(tmp_path.rglob("*initialize*.json"))
    # a version the SDK does not negotiate: the newest it does, as the SDK answers
    got, err = _session(config, db, _initialize("2099-01-01"))
    assert _answers(got) == [initialize_result("2099-01-01", "dynamic")]
    assert _answers(got)[0]["protocolVersion"] == HANDSHAKE_VERSIONS[-1]
    assert "differs" not in err


def test_a_malformed_initialize_is_left_to_the_sdk(tmp_path: Path) -> None:
    """A request the SDK refuses is not answered early: the client gets the SDK's error,
    once."""
    config, db = _config(tmp_path), tmp_path / "c.db"
    bad = _initialize()
    del bad["params"]["clientInfo"]
    assert not early_mod._valid_params(bad["params"])
    assert not early_mod._valid_params({**_initialize()["params"], "capabilities": None})
    got, err = _session(config, db, bad)
    (answer,) = _answers(got)
    assert "code" in answer and "initialize answered early" not in err


def test_only_mcp_serve_over_stdio_with_a_readable_config_reads_ahead(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert begin(["toolscout", "search", "x"]) is None
    assert begin(["toolscout", "mcp", "inspect", "-c", str(config)]) is None
    assert begin(["toolscout", "mcp", "serve", "-c", str(config), "-t", "http"]) is None
    assert begin(["toolscout", "mcp", "serve", "--transport=http", "-c", str(config)]) is None
    assert begin(["toolscout", "mcp", "serve"]) is None  # no config: the command says so
    assert _option(["--config=a.json"], "--config", "-c") == "a.json"
    assert _option(["-c", "b.json"], "--config", "-c") == "b.json"
    # the mode: --mode, else the config's, else auto; nothing for what the command refuses
    assert listing_mode(config, []) == "auto"
    assert listing_mode(config, ["--mode", "direct"]) == "direct"
    assert listing_mode(config, ["--mode=meta"]) == "meta"
    assert listing_mode(_config(tmp_path, mode="dynamic"), []) == "dynamic"
    assert listing_mode(config, ["--mode", "everything"]) is None
    assert listing_mode(_config(tmp_path, mode="bogus"), []) is None
    assert listing_mode(tmp_path / "missing.json", []) is None
    for text in ("not json", "[]", '{"toolscout": []}'):
        config.write_text(text)
        assert listing_mode(config, []) is None


def test_a_stored_start_warms_up_beside_the_sdk_import(tmp_path: Path) -> None:
    """With a stored catalog and ``initialize`` answered early, the warm-up (the encoder's
    first run, the caller's state) starts with the catalog, not after the first
    ``tools/list``; the session is served as before."""
    config, db = _config(tmp_path), tmp_path / "c.db"
    _session(config, db)  # a first start: indexes the time server
    second, err = _session(config, db)
    assert _answers(second) == [initialize_result("2025-06-18", "auto")]
    listed = next(m["result"]["tools"] for m in second if m.get("id") == 2)
    assert {t["name"] for t in listed} == {"get_current_time", "convert_time"}  # direct: < 10
    # started with the catalog, before the SDK's import (which takes seconds) is done
    before_sdk = err.split("MCP SDK imported")[0]
    assert "catalog open (2 tools)" in before_sdk and "warm-up started" in before_sdk
    # the stored servers still wait for the first tools/call (or a request needing them),
    # not just for the warm-up, which is done before the client's first request
    assert "starting the stored servers" not in err.split("first tools/list answered")[0]
    assert err.count("warm-up started") >= 1 and "differs" not in err
