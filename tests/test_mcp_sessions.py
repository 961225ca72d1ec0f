"""Over streamable HTTP each caller gets its own upstream session: state one caller leaves
in an upstream (here, a stdio server's memory) is never seen by another caller; with
``upstream_sessions: "shared"`` it is (the documented trade-off)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _mcp_kit import APP, free_port, stop, wait_port
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
        "mcpServers": {"app": {"command": sys.executable, "args": [str(APP), "--stdio"],
                               "toolscout": {"scopes": []}}},
        "toolscout": {"jwt_key": KEY, "mode": "direct", "connect_timeout_s": 60,
                      "upstream_sessions": sessions, "db": str(tmp_path / "g.db")},
    }))  # fmt: skip
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolscout", "mcp", "serve", "--config", str(config),
         "--transport", "http", "--port", str(port)],
        stderr=subprocess.DEVNULL, env={**__import__("os").environ,
                                        "XDG_DATA_HOME": str(tmp_path / "xdg")},
    )  # fmt: skip
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
