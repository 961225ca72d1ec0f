"""Closing the gateway while an upstream is (re)connecting ends its supervision at once
(mcp/supervisor.py, ``Supervisor.aclose``): the cancellation is not taken for an
upstream fault and retried."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from _mcp_kit import mute_listener, start_app, stop
from port_kit import free_port
from toolscout.errors import ExecutorError
from toolscout.mcp.config import parse_config
from toolscout.mcp.upstream import Upstreams


async def _closed_at_once(ups: Upstreams, app: Any) -> None:
    """``ups`` closed while ``app``'s supervision runs: it is done after ``aclose``."""
    task = app._task
    assert task is not None and not task.done()
    await ups.aclose()
    assert task.done(), "the supervision went on after aclose"
    assert app.state == "down"


@pytest.mark.parametrize("kind", ["http", "stdio"])
def test_closing_while_an_upstream_connects_ends_its_supervision(kind: str) -> None:
    srv, url = mute_listener()
    server: dict[str, object] = (
        {"url": url}
        if kind == "http"
        else {"command": sys.executable, "args": ["-c", "import time; time.sleep(120)"]}
    )

    async def scenario() -> None:
        cfg = parse_config(
            {"mcpServers": {"app": server},
             "toolscout": {"timeout_s": 30.0, "connect_timeout_s": 0.5}}
        )  # fmt: skip
        ups = Upstreams(cfg, poll_s=0.3)
        await ups.start()  # returns after connect_timeout_s: the server never answers
        app = ups.servers["app/"]
        assert app.state == "connecting"
        await _closed_at_once(ups, app)

    try:
        asyncio.run(scenario())
    finally:
        srv.close()


def test_closing_after_the_upstream_died_ends_its_supervision() -> None:
    """The upstream was up, then stopped: the supervision is retrying it when the gateway
    closes, and that close ends it rather than leaving it retrying (round nineteen: it
    went on, and aclose gave up after 5 s)."""
    port = free_port()
    proc = start_app(port)

    async def scenario() -> None:
        cfg = parse_config(
            {"mcpServers": {"app": {"url": f"http://127.0.0.1:{port}/mcp"}},
             "toolscout": {"timeout_s": 1.0}}
        )  # fmt: skip
        ups = Upstreams(cfg, poll_s=0.5)
        await ups.start()
        app = ups.servers["app/"]
        echo = ups.tools()["app/echo"].spec
        stop(proc)
        with pytest.raises(ExecutorError):
            for _ in range(50):  # until a call meets the server gone
                await ups.call(echo, {"text": "x"})
                await asyncio.sleep(0.1)
        await _closed_at_once(ups, app)

    try:
        asyncio.run(scenario())
    finally:
        stop(proc)
