"""Tests for toolscout.executors.mcp: a real upstream MCP server over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fork_kit
from _gateway_kit import gateway, spec, token
from port_kit import free_port
from toolscout.cards import Risk, ToolSpec
from toolscout.errors import ConfigError, ExecutorError, ExecutorTimeout
from toolscout.executors.base import Executor
from toolscout.executors.mcp import MCPExecutor
from toolscout.gateway.core import ExecutionResult

SERVER = Path(__file__).parent / "fixtures" / "upstream_mcp_server.py"
#: the upstream started cold, for the test of its process's death and the executor's respawn
STDIO = [sys.executable, str(SERVER)]


def forked(script: Path = SERVER, *args: str) -> list[str]:
    """``python SCRIPT ARGS`` forked from the worker's fork server (``fork_kit``: a process
    of its own on the executor's pipes, with the MCP SDK imported ahead), for the tests of
    what the executor does with a running upstream, not of the upstream's process."""
    return fork_kit.command(script, *args)


@pytest.fixture(scope="module")
def devnull() -> Iterator[Any]:
    with open(os.devnull, "w") as f:
        yield f


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        forked(SERVER, "http", str(port)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the upstream MCP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def up(name: str, **fields: Any) -> ToolSpec:
    fields.setdefault("parameters", {})
    return spec(f"up/{name}", name=name, **fields)


def test_stdio_calls_results_errors_and_reuse(devnull: Any) -> None:
    ex = MCPExecutor(forked(), prefix="up/", errlog=devnull)
    assert isinstance(ex, Executor)

    async def go() -> None:
        try:
            assert await ex.call(up("add"), {"a": 2, "b": 3}) == {"result": 5}
            assert await ex.call(up("greet"), {"name": "ada"}) == {"result": "hello ada"}
            with pytest.raises(ExecutorError) as err:
                await ex.call(up("boom"), {"message": "kaput"})
            assert err.value.reason == "tool_failed" and err.value.tool_id == "up/boom"
            with pytest.raises(ExecutorError) as err:
                await ex.call(up("no_such_tool"), {})
            assert err.value.reason == "tool_failed"
            # one connection, one process, shared by concurrent calls
            pids = await asyncio.gather(*(ex.call(up("pid"), {}) for _ in range(5)))
            assert len({p["result"] for p in pids}) == 1
            # the card name is used when the id does not carry the prefix
            named = spec("elsewhere.sum", name="add", parameters={})
            assert await ex.call(named, {"a": 1, "b": 1}) == {"result": 2}
        finally:
            await ex.aclose()

    asyncio.run(go())


def test_list_specs_maps_tools_and_risk(devnull: Any) -> None:
    ex = MCPExecutor(forked(), prefix="up/", errlog=devnull)

    async def go() -> list[ToolSpec]:
        try:
            return await ex.list_specs(scopes=["upstream:use"], group="upstream")
        finally:
            await ex.aclose()

    specs = {s.id: s for s in asyncio.run(go())}
    assert set(specs) == {"up/add", "up/pid", "up/slow", "up/boom", "up/greet"}
    assert specs["up/add"].card.summary == "Add two numbers."
    assert specs["up/add"].parameters["required"] == ["a", "b"]
    assert specs["up/add"].card.scopes == ("upstream:use",)
    assert specs["up/add"].card.risk is Risk.READ
    assert specs["up/slow"].card.risk is Risk.WRITE
    assert specs["up/boom"].card.risk is Risk.DESTRUCTIVE  # the MCP default
    assert specs["up/add"].card.source.startswith("mcp:")


def test_gateway_over_mcp_timeout_does_not_block_a_fast_call(tmp_path: Path, devnull: Any) -> None:
    ex = MCPExecutor(forked(), prefix="up/", errlog=devnull)
    schema = {"type": "object", "additionalProperties": True}
    specs = [up("slow", parameters=schema), up("add", parameters=schema)]
    gw, _, audit = gateway(tmp_path, specs, ex, timeout_s=1.0)

    async def go() -> list[Any]:
        try:
            await ex.call(up("add"), {"a": 0, "b": 0})  # connect first: spawning is not the test
            return await asyncio.gather(
                gw.execute(token(), "up/slow", {"seconds": 5}),
                gw.execute(token(), "up/add", {"a": 20, "b": 22}),
                return_exceptions=True,
            )
        finally:
            await gw.aclose()

    slow, fast = asyncio.run(go())
    assert isinstance(slow, ExecutorTimeout)
    assert isinstance(fast, ExecutionResult) and fast.value == {"result": 42}
    assert {r.tool_id: r.status for r in audit.read()} == {"up/slow": "timeout", "up/add": "ok"}


def test_sync_gateway_keeps_one_upstream_connection(tmp_path: Path, devnull: Any) -> None:
    ex = MCPExecutor(forked(), prefix="up/", errlog=devnull)
    gw, _, _ = gateway(tmp_path, [up("pid")], ex)
    try:
        first = gw.execute_sync(token(), "up/pid", {}).value
        second = gw.execute_sync(token(), "up/pid", {}).value
    finally:
        gw.close()
    assert first == second


def test_streamable_http(http_url: str) -> None:
    ex = MCPExecutor(http_url, prefix="up/")
    with_headers = MCPExecutor(http_url, prefix="up/", headers={"x-tenant": "acme"})

    async def go() -> None:
        try:
            assert await ex.call(up("add"), {"a": 1, "b": 2}) == {"result": 3}
            assert await with_headers.call(up("greet"), {"name": "bo"}) == {"result": "hello bo"}
            with pytest.raises(ExecutorError) as err:
                await ex.call(up("boom"), {"message": "x"})
            assert err.value.reason == "tool_failed"
        finally:
            await ex.aclose()
            await with_headers.aclose()

    asyncio.run(go())


def test_unavailable_upstreams_are_typed(devnull: Any) -> None:
    missing = MCPExecutor([sys.executable, "-c", "import sys; sys.exit(3)"], errlog=devnull)
    refused = MCPExecutor("http://127.0.0.1:9/mcp")

    async def go(ex: MCPExecutor) -> ExecutorError:
        try:
            with pytest.raises(ExecutorError) as err:
                await asyncio.wait_for(ex.call(up("add"), {}), 20)
            return err.value
        finally:
            await ex.aclose()

    for ex in (missing, refused):
        err = asyncio.run(go(ex))
        assert err.reason == "upstream_unavailable", err


def test_config_errors() -> None:
    with pytest.raises(ConfigError):
        MCPExecutor("ftp://x")
    with pytest.raises(ConfigError):
        MCPExecutor([])


def test_label_hides_credentials() -> None:
    ex = MCPExecutor("https://user:s3cret@mcp.example.com:8443/mcp?token=abc")
    assert ex.label == "https://mcp.example.com:8443/mcp"


# ------------------------------------------------------------------ hardening


def test_a_killed_upstream_is_reported_unavailable_and_reconnected_after_back_off(
    devnull: Any,
) -> None:
    ex = MCPExecutor(STDIO, prefix="up/", errlog=devnull, backoff_s=0.3, max_backoff_s=1.0)

    async def go() -> None:
        try:
            first = (await ex.call(up("pid"), {}))["result"]
            slow = asyncio.ensure_future(ex.call(up("slow"), {"seconds": 30}))
            await asyncio.sleep(0.3)
            os.kill(first, 9)  # the upstream dies mid-call
            with pytest.raises(ExecutorError) as err:
                await asyncio.wait_for(slow, 10)
            assert err.value.reason == "upstream_unavailable"
            assert "unavailable" in str(err.value) and str(first) not in str(err.value)
            # inside the back-off: fail fast, no respawn storm
            assert ex.backing_off > 0
            with pytest.raises(ExecutorError) as err:
                await ex.call(up("pid"), {})
            assert err.value.reason == "upstream_unavailable" and "backing off" in err.value.detail
            await asyncio.sleep(ex.backing_off + 0.05)
            second = (await asyncio.wait_for(ex.call(up("pid"), {}), 20))["result"]
            assert second != first  # a new upstream process
            assert ex.backing_off == 0
            assert await ex.call(up("add"), {"a": 1, "b": 2}) == {"result": 3}
        finally:
            await ex.aclose()

    asyncio.run(go())


def test_upstream_results_are_capped_and_errors_are_generic(devnull: Any) -> None:
    ex = MCPExecutor(forked(), prefix="up/", errlog=devnull, max_result_bytes=1000)

    async def go() -> None:
        try:
            assert await ex.call(up("greet"), {"name": "x" * 100}) == {
                "result": "hello " + "x" * 100
            }
            with pytest.raises(ExecutorError) as err:
                await ex.call(up("greet"), {"name": "x" * 5000})
            assert err.value.reason == "response_too_large"
            with pytest.raises(ExecutorError) as err:
                await ex.call(up("boom"), {"message": "password=hunter2"})
            assert "hunter2" not in str(err.value) and "boom" in err.value.detail
        finally:
            await ex.aclose()

    asyncio.run(go())


def test_an_upstream_schema_with_a_remote_ref_is_refused_at_import(devnull: Any) -> None:
    from toolscout.errors import CardError

    server = Path(__file__).parent / "fixtures" / "upstream_remote_ref_server.py"
    ex = MCPExecutor(forked(server), prefix="r/", errlog=devnull)

    async def go() -> None:
        try:
            with pytest.raises(CardError) as err:
                await ex.list_specs()
            assert err.value.tool_id == "r/lookup" and "127.0.0.1:9" in str(err.value)
        finally:
            await ex.aclose()

    asyncio.run(go())
