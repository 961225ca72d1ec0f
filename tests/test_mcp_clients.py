"""The gateway as MCP clients start it (issue 21): the printed client snippet starts it from
a bare environment; a plain ``mcpServers`` file gets a safe local caller; search results
carry their confidence."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _mcp_kit import APP
from fork_kit import toolscout as fork_toolscout
from fork_kit import upstream as forked
from toolscout.mcp.config import load_config, local_principal
from toolscout.mcp.server import MCPGateway

SRC = str(Path(__file__).resolve().parent.parent / "src")


def _plain(tmp_path: Path) -> Path:
    """A Claude Desktop file as people have it: no toolscout section anywhere."""
    path = tmp_path / "claude_desktop_config.json"
    servers = {"app": forked(APP, "--stdio")}
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


@pytest.mark.parametrize("client", ["claude-desktop", "cursor", "vscode", "claude-code"])
def test_config_snippet_names_absolute_paths(tmp_path: Path, client: str) -> None:
    config = _plain(tmp_path)
    done = subprocess.run(
        fork_toolscout("mcp", "config", "-c", str(config), "--client", client),
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    if client == "claude-code":
        assert done.stdout.startswith("claude mcp add ") and " toolscout -- /" in done.stdout
        assert str(config) in done.stdout
        return
    snippet = json.loads(done.stdout)
    entry = (snippet["servers"] if client == "vscode" else snippet["mcpServers"])["toolscout"]
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).is_file()
    assert entry["args"][-2:] == ["--config", str(config)]
    # desktop clients approve tools one by one: found tools keep their own identity
    assert entry["args"][-4:-2] == ["--mode", "dynamic"]


def test_unknown_client_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        fork_toolscout("mcp", "config", "-c", str(_plain(tmp_path)), "--client", "emacs"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "claude-desktop" in done.stderr


def test_snippet_starts_the_gateway_from_a_bare_environment(tmp_path: Path) -> None:
    """What a desktop client does: run the snippet's command with a minimal PATH."""
    from mcp import StdioServerParameters

    config = _plain(tmp_path)
    done = subprocess.run(
        fork_toolscout("mcp", "config", "-c", str(config)),  # the snippet; its gateway cold
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    entry = json.loads(done.stdout)["mcpServers"]["toolscout"]
    errlog = tmp_path / "stderr.txt"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": SRC,
           "XDG_DATA_HOME": str(tmp_path / "xdg")}  # fmt: skip
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env)
    names = asyncio.run(_listed(params, errlog))
    assert "echo" in names, names  # fewer than 10 tools: listed directly (auto)
    lines = [ln for ln in errlog.read_text().splitlines() if "toolscout.principal" in ln]
    assert len(lines) == 1 and "mcp:app" in lines[0], errlog.read_text()


async def _listed(params: Any, errlog: Path) -> list[str]:
    """The tool names the gateway lists, its stderr going to ``errlog``."""
    from mcp import Client
    from mcp.client.stdio import stdio_client

    with errlog.open("w") as err:
        async with Client(stdio_client(params, errlog=err), read_timeout_seconds=120) as client:
            await client.call_tool("search_tools", {"query": "echo some text"})
            listed = await client.list_tools()
    return [t.name for t in listed.tools]


def test_plain_file_gets_the_local_user_with_server_scopes_only(tmp_path: Path) -> None:
    cfg = load_config(_plain(tmp_path))
    who = local_principal(cfg)
    assert who.subject.startswith("local:") and who.scopes == frozenset({"mcp:app"})


def test_search_results_carry_confidence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp import Client

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    cfg = load_config(_plain(tmp_path))
    cfg = dataclasses.replace(cfg, principal=local_principal(cfg), mode="meta")
    gateway = MCPGateway(cfg)

    async def scenario() -> dict[str, Any]:
        async with gateway.running(wait_s=60), Client(gateway.server) as client:
            found = await client.call_tool("search_tools", {"query": "echo my text back"})
            assert isinstance(found.structured_content, dict)
            return found.structured_content

    try:
        payload = asyncio.run(scenario())
    finally:
        gateway.close()
    assert 0.0 <= payload["confidence"] <= 1.0 and isinstance(payload["low_confidence"], bool)
    assert payload["tools"][0]["name"] == "echo"


def test_inspector_one_shot_call_waits_for_a_server_still_starting(tmp_path: Path) -> None:
    """The published Inspector CLI's one-shot ``tools/call`` over stdio, on a gateway whose
    stored catalog answers ``tools/list`` at once while its upstream (3 s to start) is still
    connecting: the call waits for the server (within ``connect_timeout_s``) instead of
    answering ``upstream_unavailable``. (The shared session here; each caller's own
    session waits for its first connection the same way.)"""
    from _mcp_kit import inspector_cli

    config = tmp_path / "servers.json"
    servers = {"app": forked(APP, "--stdio", "--delay", "3")}
    gateway = {"db": str(tmp_path / "catalog.db"), "connect_timeout_s": 120,
               "upstream_sessions": "shared"}  # fmt: skip
    config.write_text(json.dumps({"mcpServers": servers, "toolscout": gateway}))
    env = {**__import__("os").environ, "PYTHONPATH": SRC, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    first = MCPGateway(load_config(config))  # a first start stores the catalog

    async def index() -> None:
        async with first.running(wait_s=60):
            pass

    try:
        asyncio.run(index())
    finally:
        first.close()
    cmd, cwd = inspector_cli()
    called = subprocess.run(
        [*cmd, sys.executable, "-m", "toolscout", "mcp", "serve", "-c", str(config),
         "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hello"],
        cwd=cwd, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert called.returncode == 0, called.stderr[-2000:]
    out = json.loads(called.stdout)
    assert not out.get("isError") and out["content"][0]["text"] == "hello", out
