"""A request for an upstream that went down and came back: the gateway tries it again at
once instead of failing the request until its back-off ends (mcp/supervisor.py,
``Supervisor.reconnect_now``)."""

from __future__ import annotations

import asyncio
import itertools
import sys

import pytest

from _mcp_kit import start_app, stop
from port_kit import free_port
from toolscout.cards import make_spec
from toolscout.errors import ExecutorError
from toolscout.mcp import supervisor
from toolscout.mcp.config import parse_config
from toolscout.mcp.upstream import Upstreams


def _upstreams(port: int) -> Upstreams:
    cfg = parse_config(
        {"mcpServers": {"app": {"url": f"http://127.0.0.1:{port}/mcp"}},
         "toolscout": {"timeout_s": 30.0}}
    )  # fmt: skip
    return Upstreams(cfg, poll_s=0.3)


async def _until(check: object, what: str) -> None:
    for _ in range(1200):
        if callable(check) and check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not {what} after 60 s")


def test_a_request_after_the_upstream_came_back_is_served_before_the_back_off_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a back-off far longer than the test: only a request's own wake-up can reconnect
    monkeypatch.setattr(supervisor, "BACKOFF", (300.0, 2.0, 300.0))
    port = free_port()
    proc = start_app(port)

    async def scenario() -> None:
        nonlocal proc
        ups = _upstreams(port)
        try:
            await ups.start()
            app = ups.servers["app/"]
            echo = ups.tools()["app/echo"].spec
            assert (await ups.call(echo, {"text": "one"}))["content"][0]["text"] == "one"
            stop(proc)
            await _until(lambda: app.state == "down", "noticed down")  # the re-list failed
            with pytest.raises(ExecutorError, match="'app' is unavailable") as down:
                await ups.call(echo, {"text": "x"})  # one attempt, refused: fails
            assert down.value.reason == "upstream_unavailable"
            connects = app.connects
            proc = await asyncio.to_thread(start_app, port)
            back = await ups.call(echo, {"text": "back"})
            assert back["content"][0]["text"] == "back"
            assert app.state == "up" and app.connects == connects + 1
        finally:
            await ups.aclose()

    try:
        asyncio.run(scenario())
    finally:
        stop(proc)


def test_requests_to_a_server_still_down_do_not_make_attempts_back_to_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(supervisor, "BACKOFF", (300.0, 2.0, 300.0))
    monkeypatch.setattr(supervisor, "MIN_RETRY_S", 1.0)
    port = free_port()
    proc = start_app(port)
    attempts: list[float] = []
    requests = 0

    async def scenario() -> None:
        nonlocal requests
        ups = _upstreams(port)
        try:
            await ups.start()
            app = ups.servers["app/"]
            echo = ups.tools()["app/echo"].spec
            stop(proc)
            await _until(lambda: app.state == "down", "noticed down")
            real = app._connected_session

            async def counted() -> None:
                attempts.append(asyncio.get_running_loop().time())
                await real()

            monkeypatch.setattr(app, "_connected_session", counted)
            loop = asyncio.get_running_loop()
            start = loop.time()
            while loop.time() - start < 2.5:  # bursts of four requests at once for 2.5 s
                got = await asyncio.gather(
                    *(ups.call(echo, {"text": "x"}) for _ in range(4)), return_exceptions=True
                )
                requests += len(got)
                assert all(isinstance(g, ExecutorError) and "unavailable" in str(g) for g in got)
        finally:
            await ups.aclose()

    try:
        asyncio.run(scenario())
    finally:
        stop(proc)
    # one attempt a second at most (MIN_RETRY_S), not one a request (however loaded the
    # machine, the spacing holds; the count is bounded by the bursts, not by the clock)
    assert 1 <= len(attempts) <= requests // 4, (attempts, requests)
    assert all(b - a >= 0.95 for a, b in itertools.pairwise(attempts)), attempts


def test_a_stdio_server_that_keeps_failing_is_started_on_the_back_offs_schedule_not_per_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a stdio server is a process the gateway starts: requests do not start it again
    monkeypatch.setattr(supervisor, "BACKOFF", (300.0, 2.0, 300.0))
    cfg = parse_config(
        {"mcpServers": {"dead": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}},
         "toolscout": {"timeout_s": 5.0, "connect_timeout_s": 0.5}}
    )  # fmt: skip
    spec = make_spec({"id": "dead/echo", "summary": "Echo text.", "source": "mcp:dead"})
    attempts: list[float] = []

    async def scenario() -> None:
        ups = Upstreams(cfg, poll_s=0.3)
        dead = ups.servers["dead/"]
        real = dead._connected_session

        async def counted() -> None:
            attempts.append(asyncio.get_running_loop().time())
            await real()

        monkeypatch.setattr(dead, "_connected_session", counted)
        try:
            await ups.start()
            await _until(lambda: dead.tried.is_set(), "tried")
            for _ in range(5):
                with pytest.raises(ExecutorError, match="'dead' is unavailable"):
                    await ups.call(spec, {"text": "x"})
        finally:
            await ups.aclose()

    asyncio.run(scenario())
    assert len(attempts) == 1, attempts
