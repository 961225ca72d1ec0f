"""Progress an upstream reports while serving a call reaches the caller through the gateway,
and keeps a long call alive past its tool's ``timeout_s``; without progress the time-out ends
it. (Sampling, elicitation, logging, templates and subscriptions through the gateway are
checked by the official conformance suite, ``test_mcp_conformance.py``: the SDK-written test
upstream speaks the 2026-07-28 protocol, where those go through input-required results.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from _mcp_kit import APP, local_gateway
from fork_kit import upstream as forked
from toolscout.mcp.config import parse_config
from toolscout.mcp.server import MCPGateway


@pytest.fixture
def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    servers = {"app": {**forked(APP, "--stdio"),
                       "toolscout": {"scopes": [], "tools": {
                           "progress": {"timeout_s": 1}, "slow": {"timeout_s": 1}}}}}  # fmt: skip
    yield from local_gateway(servers, tmp_path)


@pytest.fixture
def patient_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The same upstream with its default time-out (far past the caller's 2 s wait), so the
    caller's cancellation is the only thing that can end the call: with ``slow`` at 1 s the
    gateway's own time-out (1-2 s after the send, by when progress was last seen) raced it."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    servers = {"app": {**forked(APP, "--stdio"),
                       "toolscout": {"scopes": [], "timeout_s": 120}}}  # fmt: skip
    yield from local_gateway(servers, tmp_path)


def _text(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


def test_progress_reaches_the_caller_and_keeps_the_call_alive(gateway: MCPGateway) -> None:
    from mcp import Client

    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def scenario() -> tuple[Any, Any]:
        async with gateway.running(wait_s=60), Client(gateway.server, mode="legacy") as client:
            # 3 s of work under a 1 s time-out for this tool: progress moves the deadline
            done = await client.call_tool("progress", {"seconds": 3}, progress_callback=on_progress)
            # the same time-out without progress ends the call, naming it
            silent = await client.call_tool("slow", {"seconds": 3})
            return done, silent

    done, silent = asyncio.run(scenario())
    assert not done.is_error and _text(done) == "worked 3.0", _text(done)
    assert silent.is_error and "upstream_timeout" in _text(silent)
    assert len(seen) >= 10 and seen[-1][0] == seen[-1][1] and "step" in str(seen[-1][2])


def test_size_limits_are_per_server_and_generous_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caps once fixed at 64 KiB (arguments) and 256 KiB (results) are settings: by
    default 4 MiB and 16 MiB, and each server may set its own, smaller or larger."""
    from mcp import Client

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    app = forked(APP, "--stdio")
    cfg = parse_config({
        "mcpServers": {
            "roomy": {**app, "toolscout": {"scopes": []}},
            "tight": {**app, "toolscout": {"scopes": [], "max_argument_bytes": 1024,
                                           "max_result_bytes": 2048}},
        },
        "toolscout": {"mode": "direct", "connect_timeout_s": 60,
                      "principal": {"subject": "dev"}, "db": str(tmp_path / "g.db")},
    })  # fmt: skip
    gw = MCPGateway(cfg)
    big_text = "y" * (300 * 1024)  # over both old caps, as an argument and as a result

    async def scenario() -> dict[str, Any]:
        async with gw.running(wait_s=60), Client(gw.server, mode="legacy") as client:
            return {
                "roomy_echo": await client.call_tool("roomy_echo", {"text": big_text}),
                "roomy_big": await client.call_tool("roomy_big", {"size": 300 * 1024}),
                "tight_echo": await client.call_tool("tight_echo", {"text": "z" * 2000}),
                "tight_big": await client.call_tool("tight_big", {"size": 4000}),
                "tight_small": await client.call_tool("tight_echo", {"text": "fits"}),
            }

    try:
        out = asyncio.run(scenario())
    finally:
        gw.close()
    assert not out["roomy_echo"].is_error and _text(out["roomy_echo"]) == big_text
    assert not out["roomy_big"].is_error and len(_text(out["roomy_big"])) == 300 * 1024
    assert out["tight_echo"].is_error and "arguments_too_large" in _text(out["tight_echo"])
    assert out["tight_big"].is_error and "response_too_large" in _text(out["tight_big"])
    assert _text(out["tight_small"]) == "fits"


def test_a_callers_cancellation_reaches_the_upstream_call(patient_gateway: MCPGateway) -> None:
    """A client that gives up on a call cancels it through the gateway: the upstream request
    is abandoned (the SDK tells the upstream), the audit says ``cancelled``, and the session
    serves the next call."""
    from mcp import Client

    gateway = patient_gateway

    async def scenario() -> tuple[list[int], Any]:
        async with gateway.running(wait_s=60), Client(gateway.server, mode="legacy") as client:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(client.call_tool("slow", {"seconds": 30}), 2.0)
            sessions = [*gateway.upstreams.servers.values(), *gateway.upstreams.private.values()]
            for _ in range(100):  # the gateway drops the upstream request at once
                in_flight = [len(s.relay.active) for s in sessions]
                if not any(in_flight):
                    break
                await asyncio.sleep(0.05)
            return in_flight, await client.call_tool("echo", {"text": "after"})

    in_flight, after = asyncio.run(scenario())
    assert not any(in_flight), in_flight
    assert _text(after) == "after"
    rows = [r for r in gateway.ts.gateway.audit.read(subject="dev") if r.tool_id == "app/slow"]
    assert rows and rows[-1].status == "cancelled", rows


class _Caps:
    def __init__(self, **declared: object) -> None:
        for name in ("sampling", "elicitation", "roots"):
            setattr(self, name, declared.get(name))


class _Session:
    def __init__(self, caps: _Caps | None) -> None:
        self.reads = 0
        self._caps = caps

    @property
    def client_capabilities(self) -> _Caps | None:
        self.reads += 1
        return self._caps


class _Ctx:
    def __init__(self, session: _Session) -> None:
        self.session = session


def test_a_links_capabilities_are_read_once_per_request_and_follow_a_new_one() -> None:
    from toolscout.mcp.relay import Link

    first = _Session(_Caps(sampling={}))
    link = Link(_Ctx(first))
    assert link.capabilities == frozenset({"sampling"})
    assert link.capabilities == frozenset({"sampling"}) and link.client_supports("sampling")
    assert first.reads == 1  # a call asks more than once (its round, its route): read once
    # a retry's round points the link at its new request: that request's client decides
    second = _Session(_Caps(elicitation={}, roots={}))
    link.ctx = _Ctx(second)
    assert link.capabilities == frozenset({"elicitation", "roots"})
    assert not link.client_supports("sampling") and second.reads == 1
    assert Link(_Ctx(_Session(None))).capabilities == frozenset()
    assert link.detached().capabilities == frozenset({"elicitation", "roots"})
