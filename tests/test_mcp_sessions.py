"""Over streamable HTTP each caller gets its own upstream session: state one caller leaves
in an upstream (here, a stdio server's memory) is never seen by another caller; with
``upstream_sessions: "shared"`` it is (the documented trade-off). Each caller's session
gets the instructions of the upstreams it can see, and no other's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from _mcp_kit import APP, http_gateway, node_env, node_script, stop, wait_port
from fork_kit import upstream as forked
from toolscout.gateway.auth import issue_token

KEY = "mcp-sessions-test-secret-0123456789abcdef"


def _text(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


async def _as(url: str, token: str, tool: str, args: dict[str, Any]) -> str:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        return _text(await client.call_tool(tool, args))


@pytest.mark.parametrize("sessions", ["per_caller", "shared"])
def test_callers_do_not_share_upstream_state(tmp_path: Path, sessions: str) -> None:
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({
        "mcpServers": {"app": {**forked(APP, "--stdio"),
                               "toolscout": {"scopes": []}}},
        "toolscout": {"jwt_key": KEY, "mode": "direct", "connect_timeout_s": 60,
                      "upstream_sessions": sessions, "db": str(tmp_path / "g.db")},
    }))  # fmt: skip
    proc, port = http_gateway(config, tmp_path)
    url = f"http://127.0.0.1:{port}/mcp"
    alice = issue_token(subject="alice", key=KEY, scopes=[])
    bob = issue_token(subject="bob", key=KEY, scopes=[])
    try:
        wait_port(port, 120)
        assert asyncio.run(_as(url, alice, "remember", {"text": "alice's secret"})) == "kept"
        assert asyncio.run(_as(url, alice, "recall", {})) == "alice's secret"
        seen = asyncio.run(_as(url, bob, "recall", {}))
        if sessions == "per_caller":
            assert seen == "(nothing)"
        else:
            assert seen == "alice's secret"
    finally:
        stop(proc)  # type: ignore[arg-type]


#: a server with instructions of its own and one tool (the published TypeScript SDK)
INSTRUCTED = r"""
const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StdioServerTransport } = require("@modelcontextprotocol/sdk/server/stdio.js");
const name = process.argv[2];
const server = new McpServer({ name, version: "1.0.0" },
                             { instructions: `Ask the ${name} server politely.` });
server.registerTool(`hello_${name}`, { description: `Say hello from ${name}`,
                                       annotations: { readOnlyHint: true } },
  async () => ({ content: [{ type: "text", text: `hello from ${name}` }] }));
server.connect(new StdioServerTransport());
"""


async def _instructions(url: str, token: str, mode: str) -> str:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        return client.instructions or ""


def test_each_caller_gets_the_instructions_of_the_servers_it_can_see(tmp_path: Path) -> None:
    """Two upstreams, each behind its own scope: a caller holding one scope is told that
    server's instructions, not the other's; a caller holding neither, the gateway's own."""
    cmd = node_script(tmp_path / "instructed.cjs", INSTRUCTED)
    servers = {
        color: {"command": cmd[0], "args": [*cmd[1:], color], "env": node_env(),
                "toolscout": {"scopes": [color]}}
        for color in ("red", "blue")
    }  # fmt: skip
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({
        "mcpServers": servers,
        "toolscout": {"jwt_key": KEY, "mode": "direct", "connect_timeout_s": 60,
                      "db": str(tmp_path / "g.db")},
    }))  # fmt: skip
    proc, port = http_gateway(config, tmp_path)
    url = f"http://127.0.0.1:{port}/mcp"
    red = issue_token(subject="alice", key=KEY, scopes=["red"])
    blue = issue_token(subject="bob", key=KEY, scopes=["blue"])
    none = issue_token(subject="carol", key=KEY, scopes=[])

    async def until(token: str, mode: str, text: str) -> str:
        seen = ""
        for _ in range(240):  # the upstreams connect in the background
            seen = await _instructions(url, token, mode)
            if text in seen:
                break
            await asyncio.sleep(0.25)
        return seen

    async def scenario() -> tuple[str, str, str]:
        # a handshake-era caller (initialize) and a 2026-07-28 one (server/discover)
        alice = await until(red, "legacy", "[red] Ask the red server politely.")
        bob = await until(blue, "auto", "[blue] Ask the blue server politely.")
        return alice, bob, await _instructions(url, none, "legacy")

    try:
        wait_port(port, 120)
        alice, bob, carol = asyncio.run(scenario())
    finally:
        stop(proc)  # type: ignore[arg-type]
    assert "[red] Ask the red server politely." in alice and "[blue]" not in alice, alice
    assert "[blue] Ask the blue server politely." in bob and "[red]" not in bob, bob
    assert "[red]" not in carol and "[blue]" not in carol and carol.startswith("The tools"), carol
