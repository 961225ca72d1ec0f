"""The MCP gateway end to end: real upstreams, real clients (SDK stdio and HTTP, Inspector CLI).

* stdio: ``toolscout mcp serve`` as a subprocess fronting the published servers;
  search → call → their real results; a guessed, unentitled tool refused and audited.
* HTTP: bearer tokens per request, 401 with protected-resource metadata, the
  Inspector CLI listing and calling through the gateway.
* in process: a tool added upstream is searchable after ``list_changed``; an
  upstream killed mid-session fails clearly while the others answer, and is
  reconnected; the dynamic list stays bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from _mcp_kit import (
    ROOT,
    forked_py_server,
    inspector_cli,
    npm_server,
    start_app,
    stop,
    wait_port,
)
from fork_kit import toolscout as fork_toolscout
from port_kit import free_port
from toolscout.gateway.audit import AuditLog
from toolscout.gateway.auth import issue_token
from toolscout.mcp.config import parse_config
from toolscout.mcp.server import MCPGateway
from toolscout.policy import Principal
from toolscout.settings import Settings

TOOLSCOUT = str(Path(sys.executable).parent / "toolscout")


@pytest.fixture(autouse=True)
def _data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway's default catalog and audit live under the user data directory: here."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


KEY = "mcp-gateway-test-secret-0123456789abcdef"


def _published(tmp_path: Path) -> dict[str, Any]:
    """Real published upstreams with toolscout sections (and git without one); the Python
    ones forked from the worker's fork server (``fork_kit``: their own processes on the
    gateway's pipes, the published code run as its script runs it)."""
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "hello.txt").write_text("hello from disk")
    memory = npm_server("server-memory")
    files = npm_server("server-filesystem")
    return {
        "time": forked_py_server("mcp-server-time", toolscout={"scopes": ["time:read"]}),
        "memory": {
            "command": memory[0],
            "args": memory[1:],
            "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
            "toolscout": {"scopes": ["memory:use"], "risk": {"delete_*": "write"}},
        },
        "files": {
            "command": files[0],
            "args": [*files[1:], str(tmp_path / "files")],
            "toolscout": {"scopes": ["files:read"], "hide": ["read_file"]},
        },
        "git": forked_py_server("mcp-server-git"),  # the safe default: needs mcp:git
    }


def _write(path: Path, servers: dict[str, Any], **gateway: Any) -> Path:
    path.write_text(json.dumps({"mcpServers": servers, "toolscout": gateway}))
    return path


def _text(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


def test_stdio_gateway_over_published_servers(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters

    db = tmp_path / "gateway.db"
    config = _write(
        tmp_path / "servers.json",
        _published(tmp_path),
        db=str(db),
        mode="meta",
        connect_timeout_s=60,
        principal={"subject": "desk", "scopes": ["time:read", "memory:use", "files:read"]},
    )
    gateway = fork_toolscout("mcp", "serve", "--config", str(config))  # forked: fork_kit
    params = StdioServerParameters(
        command=gateway[0],
        args=gateway[1:],
        cwd=str(tmp_path),
        env={**os.environ},  # the SDK passes only a few variables on; PYTHONPATH must reach it
    )

    async def scenario() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            listed = await client.list_tools()
            assert [t.name for t in listed.tools] == ["search_tools", "call_tool"]
            found = await client.call_tool(
                "search_tools", {"query": "list the files in a folder", "k": 5}
            )
            payload = json.loads(_text(found))
            names = [t["name"] for t in payload["tools"]]
            # a tool keeps its server's own name when no other server has one like it
            assert "list_directory" in names, names
            entry = payload["tools"][names.index("list_directory")]
            assert entry["id"] == "files/list_directory" and entry["server"] == "files"
            assert "path" in entry["inputSchema"]["properties"]
            listing = await client.call_tool(
                "call_tool",
                {"name": "list_directory", "arguments": {"path": str(tmp_path / "files")}},
            )
            assert not listing.is_error and "hello.txt" in _text(listing)
            now = await client.call_tool(
                "call_tool", {"name": "time/get_current_time", "arguments": {"timezone": "UTC"}}
            )
            assert not now.is_error and json.loads(_text(now))["timezone"] == "UTC"
            made = await client.call_tool(
                "call_tool",
                {
                    "name": "memory_create_entities",
                    "arguments": {
                        "entities": [{"name": "Ada", "entityType": "person", "observations": []}]
                    },
                },
            )
            assert not made.is_error, _text(made)
            # git has no toolscout section: its tools need mcp:git, which desk lacks
            git = await client.call_tool("search_tools", {"query": "git status of the repo"})
            assert all(t["server"] != "git" for t in json.loads(_text(git))["tools"])
            guessed = await client.call_tool(
                "call_tool", {"name": "git_git_status", "arguments": {"repo_path": "."}}
            )
            assert guessed.is_error and "refused" in _text(guessed)
            hidden = await client.call_tool(
                "call_tool", {"name": "files_read_file", "arguments": {"path": "x"}}
            )
            assert hidden.is_error and "unknown_tool" in _text(hidden)

    asyncio.run(scenario())
    audit = AuditLog(Settings(db=str(db)).audit_target())
    try:
        records = audit.read(subject="desk")
    finally:
        audit.close()
    refused = [r for r in records if r.tool_id == "git/git_status"]
    assert refused and refused[-1].decision == "denied"
    assert any(r.tool_id == "files/list_directory" and r.status == "ok" for r in records)


def test_http_gateway_tokens_metadata_and_inspector(tmp_path: Path) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    servers = {"time": _published(tmp_path)["time"]}
    config = _write(
        tmp_path / "servers.json",
        servers,
        jwt_key=KEY,
        connect_timeout_s=60,
        authorization_servers=["https://idp.example.test"],
    )
    port = free_port()
    proc = subprocess.Popen(
        fork_toolscout("mcp", "serve", "--config", str(config), "--transport", "http",
                       "--port", str(port)),
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"
    reader = issue_token(subject="reader", key=KEY, scopes=["time:read"])
    stranger = issue_token(subject="stranger", key=KEY, scopes=["other:read"])
    try:
        wait_port(port, 90)
        bare = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert bare.status_code == 401
        assert "resource_metadata=" in bare.headers["www-authenticate"]
        meta = httpx.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp")
        assert meta.json()["authorization_servers"] == ["https://idp.example.test"]
        assert meta.json()["resource"] == url

        async def as_caller(token: str, mode: str = "auto") -> tuple[list[str], Any]:
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                Client(streamable_http_client(url, http_client=http), mode=mode) as client,
            ):
                tools_caps = client.server_capabilities.tools
                assert tools_caps is not None and tools_caps.list_changed
                listed = await client.list_tools()
                call = await client.call_tool(
                    "call_tool",
                    {"name": "time_get_current_time", "arguments": {"timezone": "UTC"}},
                )
                return [t.name for t in listed.tools], call

        names, call = asyncio.run(as_caller(reader))
        # two entitled tools: under the tier rule they are listed directly
        assert names == ["get_current_time", "convert_time"]  # the server's own names
        assert not call.is_error and '"timezone": "UTC"' in _text(call)
        names, call = asyncio.run(as_caller(stranger, mode="legacy"))
        assert "get_current_time" not in names
        assert call.is_error and "refused" in _text(call)

        cmd, cwd = inspector_cli()
        base = [*cmd, url, "--transport", "http", "--header", f"Authorization: Bearer {reader}"]
        listed = subprocess.run(
            [*base, "--method", "tools/list"], cwd=cwd, capture_output=True, text=True, timeout=60
        )
        assert listed.returncode == 0, listed.stderr
        assert {t["name"] for t in json.loads(listed.stdout)["tools"]} == {
            "get_current_time",
            "convert_time",
        }
        called = subprocess.run(
            [*base, "--method", "tools/call", "--tool-name", "call_tool",
             "--tool-arg", "name=time_convert_time",
             "--tool-arg", 'arguments={"source_timezone": "UTC", "time": "12:00", '
                           '"target_timezone": "Asia/Tokyo"}'],
            cwd=cwd, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert called.returncode == 0, called.stderr
        out = json.loads(called.stdout)
        assert not out.get("isError") and "Asia/Tokyo" in json.dumps(out)
    finally:
        stop(proc)  # type: ignore[arg-type]


def test_list_changed_faults_and_dynamic_list(tmp_path: Path) -> None:
    from mcp import Client

    port = free_port()
    proc = start_app(port)
    cfg = parse_config(
        {
            "mcpServers": {
                "time": _published(tmp_path)["time"],
                "app": {
                    "url": f"http://127.0.0.1:{port}/mcp",
                    "toolscout": {
                        "scopes": ["app:use"],
                        "tools": {"big": {"scopes": ["app:admin"]}},
                        "risk": {"add_tool": "read"},
                    },
                },
            },
            "toolscout": {
                "mode": "dynamic",
                "dynamic_limit": 3,
                "timeout_s": 60,
                "connect_timeout_s": 60,
                "principal": {"subject": "dev", "scopes": ["time:read", "app:use"]},
            },
        }
    )
    gateway = MCPGateway(cfg, poll_s=0.5)

    async def scenario() -> None:
        nonlocal proc
        async with gateway.running(), Client(gateway.server) as client:
            async with client.listen(tools_list_changed=True) as changes:
                events: list[object] = []

                async def collect() -> None:
                    async for event in changes:
                        events.append(event)

                collector = asyncio.get_running_loop().create_task(collect())
                found = json.loads(
                    _text(await client.call_tool("search_tools", {"query": "echo my text back"}))
                )
                assert "echo" in [t["name"] for t in found["tools"]]
                listed = [t.name for t in (await client.list_tools()).tools]
                assert "echo" in listed and listed[:2] == ["search_tools", "call_tool"]
                echoed = await client.call_tool("echo", {"text": "direct"})
                assert _text(echoed) == "direct"
                for _ in range(200):
                    if events:
                        break
                    await asyncio.sleep(0.05)
                assert events, "no tools/list_changed after the dynamic list grew"
                # the dynamic list is bounded: 3 found tools at most, LRU first out
                for query in ("convert a time zone", "wait some seconds", "fail on purpose",
                              "current time", "add a new tool"):  # fmt: skip
                    await client.call_tool("search_tools", {"query": query, "k": 2})
                    tools = (await client.list_tools()).tools
                    assert len(tools) <= 2 + 3, [t.name for t in tools]
                collector.cancel()
            # a tool added upstream becomes searchable (only it is embedded)
            logged = len(gateway.index_log)
            added = await client.call_tool(
                "call_tool",
                {"name": "app_add_tool", "arguments": {"name": "translate_klingon",
                 "description": "Translate English text into Klingon."}},
            )  # fmt: skip
            assert not added.is_error, _text(added)

            # the card is visible (the add ran on a worker thread) a moment before its
            # index-log entry is written; another upstream's first indexing may land in
            # between, so wait for the app's own entry rather than reading the last one
            def app_entries() -> list[tuple[str, int, int, int]]:
                return [e for e in gateway.index_log[logged:] if e[0] == "app"]

            for _ in range(600):
                if gateway.ts.catalog.spec("app/translate_klingon") is not None and app_entries():
                    break
                await asyncio.sleep(0.05)
            assert [e[1:3] for e in app_entries()] == [(1, 0)], gateway.index_log
            assert 1 <= app_entries()[0][3] <= 2
            hits = json.loads(
                _text(await client.call_tool("search_tools", {"query": "klingon translation"}))
            )
            assert hits["tools"][0]["name"] == "translate_klingon"
            # not entitled: refused, audited, whatever name is guessed
            big = await client.call_tool("call_tool", {"name": "app_big", "arguments": {"size": 1}})
            assert big.is_error and "refused" in _text(big)
            audit = gateway.ts.audit.read(subject="dev")
            assert any(r.tool_id == "app/big" and r.decision == "denied" for r in audit)
            # resources and prompts pass through, namespaced, under the server's scopes
            resources = (await client.list_resources()).resources
            assert [(r.name, str(r.uri)) for r in resources] == [
                ("app/readme", "note://test/readme")
            ]
            note = await client.read_resource("note://test/readme")
            assert note.contents[0].text == "the test upstream"  # type: ignore[union-attr]
            prompts = [p.name for p in (await client.list_prompts()).prompts]
            assert prompts == ["app/summarise"]
            prompt = await client.get_prompt("app/summarise", {"subject": "MCP"})
            assert "Summarise MCP" in prompt.messages[0].content.text  # type: ignore[union-attr]
            stranger = Principal.of("stranger", scopes=["time:read"])
            assert [u.name for u in gateway.servers_for(stranger)] == ["time"]
            # the upstream dies: its tools fail naming it, the others keep answering
            app = gateway.upstreams.servers["app/"]
            connects = app.connects  # an earlier reconnection (a loaded machine) counts too
            stop(proc)
            down = await client.call_tool("call_tool", {"name": "app_echo",
                                                        "arguments": {"text": "x"}})  # fmt: skip
            assert down.is_error and "'app'" in _text(down), _text(down)
            now = await client.call_tool(
                "call_tool", {"name": "time_get_current_time", "arguments": {"timezone": "UTC"}}
            )
            assert not now.is_error, _text(now)
            proc = await asyncio.to_thread(start_app, port)
            # reconnecting is the gateway's back-off plus the app's own start: wait on a
            # connection made after the stop (the state may still read "up" from before it
            # until the gateway notices), generously: the suite must pass on a loaded machine
            deadline = time.monotonic() + 300
            while not (app.state == "up" and app.connects > connects):
                assert time.monotonic() < deadline, f"app not back: {app.state}, {app.connects}"
                await asyncio.sleep(0.05)
            back = await client.call_tool("call_tool", {"name": "app_echo",
                                                        "arguments": {"text": "back"}})  # fmt: skip
            assert not back.is_error and _text(back) == "back", _text(back)

    try:
        asyncio.run(scenario())
    finally:
        stop(proc)
        gateway.close()


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {"x": {"url": "ftp://nope"}}}')
    nostdio = _write(tmp_path / "noprincipal.json", {})
    cases = [
        (["serve", "--config", str(bad)], "mcpServers.x.url"),
        # (stdio without a principal serves the local user: tests/test_mcp_clients.py)
        (["serve", "--config", str(nostdio), "--transport", "http"], "jwt_key"),
        (["inspect", "--config", str(tmp_path / "none.json")], "cannot read"),
    ]
    for args, needle in cases:
        run = subprocess.run(
            [TOOLSCOUT, "mcp", *args], capture_output=True, text=True, timeout=60, cwd=ROOT
        )
        assert run.returncode == 2, (args, run.stderr)
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in run.stderr, lines


def test_tools_of_servers_no_longer_configured_are_pruned(tmp_path: Path) -> None:
    from toolscout.cards import make_spec

    settings = {"db": str(tmp_path / "g.db"), "principal": {"subject": "x"}}
    cfg = parse_config({"mcpServers": {}, "toolscout": settings})
    gateway = MCPGateway(cfg)
    try:
        gateway.ts.catalog.add(
            [
                make_spec({"id": "old/t", "summary": "An old upstream tool.", "source": "mcp:old"}),
                make_spec({"id": "mine", "summary": "A tool of this catalog, not from MCP."}),
            ]
        )

        async def start_and_stop() -> None:
            async with gateway.running():
                pass

        asyncio.run(start_and_stop())
        assert gateway.ts.catalog.spec("old/t") is None
        assert gateway.ts.catalog.spec("mine") is not None
    finally:
        gateway.close()
