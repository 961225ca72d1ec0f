"""Upstream connections against real servers: published ones over stdio, an SDK one over HTTP."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from _mcp_kit import forked_py_server, mute_listener, npm_server, start_app, stop
from port_kit import free_port
from toolscout.cards import Risk
from toolscout.errors import ExecutorError
from toolscout.mcp.config import parse_config
from toolscout.mcp.upstream import Upstream, Upstreams


def _stdio(cmd: list[str], **extra: Any) -> dict[str, Any]:
    return {"command": cmd[0], "args": cmd[1:], **extra}


def test_published_servers_over_stdio(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hi")
    cfg = parse_config(
        {
            "mcpServers": {
                "time": forked_py_server("mcp-server-time"),
                "memory": _stdio(
                    npm_server("server-memory"),
                    env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
                ),
                "files": _stdio([*npm_server("server-filesystem"), str(tmp_path)]),
                "git": forked_py_server("mcp-server-git"),
            },
            "toolscout": {"connect_timeout_s": 20},
        }
    )

    async def scenario() -> None:
        ups = Upstreams(cfg)
        try:
            await ups.start()
            for up in ups.servers.values():
                assert up.state == "up", (up.name, up.last_error)
            tools = ups.tools()
            assert {"time/get_current_time", "time/convert_time"} <= set(tools)
            assert "memory/create_entities" in tools and "files/list_directory" in tools
            assert "git/git_status" in tools
            assert tools["time/get_current_time"].spec.card.risk is Risk.READ
            assert tools["files/write_file"].spec.card.risk is Risk.DESTRUCTIVE
            assert tools["files/list_directory"].spec.card.scopes == ("mcp:files",)
            now = await ups.call(tools["time/get_current_time"].spec, {"timezone": "UTC"})
            assert now["structuredContent"]["timezone"] == "UTC"
            entity = {"name": "Ada", "entityType": "person", "observations": ["wrote notes"]}
            await ups.call(tools["memory/create_entities"].spec, {"entities": [entity]})
            graph = await ups.call(tools["memory/read_graph"].spec, {})
            assert "Ada" in json.dumps(graph)
            listing = await ups.call(tools["files/list_directory"].spec, {"path": str(tmp_path)})
            assert "hello.txt" in json.dumps(listing)
        finally:
            await ups.aclose()

    asyncio.run(scenario())


def test_dead_server_does_not_hold_up_startup() -> None:
    port = free_port()  # nothing listens there
    cfg = parse_config(
        {
            "mcpServers": {
                "gone": {"url": f"http://127.0.0.1:{port}/mcp"},
                "crash": {"command": "false"},
                "time": forked_py_server("mcp-server-time"),
            },
            "toolscout": {"connect_timeout_s": 120},
        }
    )
    mute_socket, mute_url = mute_listener()  # accepts connections, never answers
    hangs = parse_config(
        {"mcpServers": {"mute": {"url": mute_url}}, "toolscout": {"connect_timeout_s": 1}}
    )

    async def scenario() -> None:
        ups = Upstreams(cfg)
        mute = Upstreams(hangs)
        try:
            await ups.start()  # the dead ones fail at once: no waiting for them
            assert ups.servers["time/"].state == "up"
            gone = ups.servers["gone/"]
            assert gone.state != "up" and gone.tools == {}
            assert "ConnectError" in gone.last_error  # why it is down, for `mcp inspect`
            t0 = time.monotonic()
            await mute.start()  # a server that never answers: bounded by connect_timeout_s
            assert time.monotonic() - t0 < 10
            assert mute.servers["mute/"].state != "up"
        finally:
            await ups.aclose()
            await mute.aclose()

    try:
        asyncio.run(scenario())
    finally:
        mute_socket.close()


def test_http_upstream_faults_and_changes() -> None:
    port = free_port()
    proc = start_app(port)
    cfg = parse_config(
        {
            "mcpServers": {"app": {"url": f"http://127.0.0.1:{port}/mcp"}},
            "toolscout": {"timeout_s": 1.0, "max_result_bytes": 4096},
        }
    )
    seen: list[set[str]] = []

    async def on_tools(up: Upstream) -> None:
        seen.append(set(up.tools))

    async def scenario() -> None:
        ups = Upstreams(cfg, on_tools=on_tools, poll_s=0.5)
        try:
            await ups.start()
            app = ups.servers["app/"]
            tools = ups.tools()
            assert app.state == "up" and "app/echo" in tools
            assert tools["app/echo"].spec.card.aliases == ("Echo text",)
            ok = await ups.call(tools["app/echo"].spec, {"text": "hello"})
            assert ok["content"][0]["text"] == "hello"
            # time-out, size cap and a tool's own error: clear, typed, named
            with pytest.raises(ExecutorError, match="did not answer") as slow:
                await ups.call(tools["app/slow"].spec, {"seconds": 5})
            assert slow.value.reason == "upstream_timeout"
            with pytest.raises(ExecutorError, match="over this server's max_result_bytes") as big:
                await ups.call(tools["app/big"].spec, {"size": 10_000})
            assert big.value.reason == "response_too_large"
            with pytest.raises(ExecutorError, match="failed on purpose") as fail:
                await ups.call(tools["app/fail"].spec, {"why": "test"})
            assert fail.value.reason == "tool_failed"
            assert app.state == "up"  # none of these broke the connection
            # a tool added upstream: list_changed → re-listed
            await ups.call(
                tools["app/add_tool"].spec, {"name": "brand_new", "description": "A new one."}
            )
            for _ in range(600):
                if "app/brand_new" in ups.tools():
                    break
                await asyncio.sleep(0.05)
            assert "app/brand_new" in seen[-1]
            # killed mid-session: a clear error naming the server (reconnection is
            # covered end to end in test_mcp_server)
            stop(proc)
            with pytest.raises(ExecutorError, match="'app' is unavailable") as down:
                for _ in range(50):
                    await ups.call(tools["app/echo"].spec, {"text": "x"})
                    await asyncio.sleep(0.1)
            assert down.value.reason == "upstream_unavailable"
        finally:
            await ups.aclose()

    try:
        asyncio.run(scenario())
    finally:
        stop(proc)


def test_commands_installed_beside_python_start_without_an_activated_venv(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from toolscout.mcp.upstream import resolve_command

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    beside = Path(sys.executable).parent / "mcp-server-time"
    assert resolve_command("mcp-server-time") == str(beside)
    assert resolve_command("sh") == "sh"  # on PATH: left alone
    assert resolve_command("./run.sh") == "./run.sh"  # a path: left alone
    assert resolve_command("no-such-server-here") == "no-such-server-here"
