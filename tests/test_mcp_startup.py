"""A start with a stored catalog (issue 24): the servers the catalog already has tools of
are started once the warm-up is done, or as soon as a request needs one — their processes
do not compete with the first search — and a call right after start-up is answered."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import threading
from pathlib import Path

import pytest

from _mcp_kit import APP
from toolscout.mcp.config import load_config, local_principal
from toolscout.mcp.server import MCPGateway

WAIT_S = 120.0


def _stored(tmp_path: Path) -> Path:
    """A config whose catalog a first start has indexed."""
    config = tmp_path / "servers.json"
    servers = {"app": {"command": sys.executable, "args": [str(APP), "--stdio"]}}
    config.write_text(
        json.dumps({"mcpServers": servers, "toolscout": {"db": str(tmp_path / "c.db")}})
    )
    first = MCPGateway(load_config(config))

    async def index() -> None:
        async with first.running(wait_s=WAIT_S):
            pass

    try:
        asyncio.run(index())
    finally:
        first.close()
    return config


def _gateway(config: Path) -> MCPGateway:
    cfg = load_config(config)
    return MCPGateway(dataclasses.replace(cfg, principal=local_principal(cfg)))


def test_stored_servers_start_once_the_warm_up_is_done(tmp_path: Path) -> None:
    gateway = _gateway(_stored(tmp_path))

    async def run() -> tuple[bool, bool, str]:
        async with gateway.running():
            up = gateway.upstreams.servers["app/"]
            before = up.state == "down" and not up.tried.is_set()  # not started yet
            await asyncio.wait_for(gateway._warmed.wait(), WAIT_S)
            listed = await up.wait_listed(WAIT_S)
            return before, listed, up.state

    try:
        before, listed, state = asyncio.run(run())
    finally:
        gateway.close()
    assert before and listed and state == "up"


def test_a_call_before_the_warm_up_starts_its_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _stored(tmp_path)
    gate = threading.Event()
    # the warm-up does not end until the call is answered (it would start every server)
    monkeypatch.setattr(MCPGateway, "_warm", lambda self: gate.wait(WAIT_S))
    gateway = _gateway(config)
    assert gateway.config.principal is not None
    principal = gateway.config.principal

    async def run() -> tuple[bool, object]:
        async with gateway.running():
            up = gateway.upstreams.servers["app/"]
            before = up.state == "down" and not up.tried.is_set()
            try:
                result = await gateway.ts.aexecute(principal, "app/echo", {"text": "hi"})
            finally:
                gate.set()
            return before, result

    try:
        before, result = asyncio.run(run())
    finally:
        gate.set()
        gateway.close()
    assert before
    assert getattr(result, "ok", False), result
