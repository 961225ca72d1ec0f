"""Tests for toolscout.executors.base: the Python registry and HTTP against a real local server."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from _gateway_kit import gateway, spec, token
from toolscout.cards import ToolSpec
from toolscout.errors import (
    ArgumentError,
    CardError,
    ConfigError,
    ExecutorError,
    ExecutorTimeout,
)
from toolscout.executors.base import Executor
from toolscout.executors.http import HTTPEndpoint, HTTPExecutor
from toolscout.executors.python import PythonExecutor, tool
from toolscout.gateway.core import ExecutionResult

# ------------------------------------------------------------------ a real HTTP server

BOMB = gzip.compress(b"\0" * 50_000_000, compresslevel=9)  # ~50 KB that inflate to 50 MB


class Handler(BaseHTTPRequestHandler):
    other_origin = ""

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _send(self, status: int, body: bytes, ctype: str = "application/json", **hdrs: str) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        for k, v in hdrs.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _echo(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        self._send(
            200,
            json.dumps(
                {
                    "method": self.command,
                    "path": url.path,
                    "query": parse_qs(url.query),
                    "body": json.loads(body) if body else None,
                    "auth": self.headers.get("authorization"),
                    "x_extra": self.headers.get("x-extra"),
                }
            ).encode(),
        )

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/slow":
            time.sleep(5.0)  # far beyond every time-out of the tests that call it
            self._send(200, b'"slow"')
        elif path == "/redirect-same":
            self._send(302, b"", location="/orders/7")
        elif path == "/redirect-other":
            self._send(302, b"", location=f"{self.other_origin}/orders/7")
        elif path == "/redirect-loop":
            self._send(302, b"", location="/redirect-loop")
        elif path == "/fail":
            self._send(500, b"internal trouble", "text/plain")
        elif path == "/big":
            self._send(200, b"x" * 2_000_000, "text/plain")
        elif path == "/text":
            self._send(200, "héllo".encode(), "text/plain; charset=utf-8")
        elif path == "/gzip-bomb":
            self._send(200, BOMB, "text/plain", **{"content-encoding": "gzip"})
        elif path == "/gzip-ok":
            self._send(200, gzip.compress(b'{"ok": true}'), **{"content-encoding": "gzip"})
        elif path == "/brotli":
            self._send(200, b"\x0b\x02\x80hi\x03", "text/plain", **{"content-encoding": "br"})
        elif path == "/accept":
            self._send(200, json.dumps(self.headers.get("accept-encoding")).encode())
        else:
            self._echo()

    do_POST = do_PUT = do_DELETE = _echo


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return None  # a client that timed out and hung up is expected here


def _serve() -> tuple[ThreadingHTTPServer, str]:
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    server, url = _serve()
    other, other_url = _serve()
    Handler.other_origin = other_url.replace("127.0.0.1", "localhost")
    yield url
    for s in (server, other):
        s.shutdown()
        s.server_close()


def endpoints(base: str) -> dict[str, HTTPEndpoint]:
    return {
        "orders.get": HTTPEndpoint("GET", base + "/orders/{order_id}", headers={"x-extra": "1"}),
        "orders.create": HTTPEndpoint("post", base + "/orders"),
        "orders.query": HTTPEndpoint("POST", base + "/search", body="query"),
        "slow": HTTPEndpoint("GET", base + "/slow"),
        "redirect.same": HTTPEndpoint("GET", base + "/redirect-same"),
        "redirect.other": HTTPEndpoint("GET", base + "/redirect-other"),
        "redirect.loop": HTTPEndpoint("GET", base + "/redirect-loop"),
        "fail": HTTPEndpoint("GET", base + "/fail"),
        "big": HTTPEndpoint("GET", base + "/big"),
        "text": HTTPEndpoint("GET", base + "/text"),
        "short": HTTPEndpoint("GET", base + "/slow", timeout_s=0.2),
    }


def S(tool_id: str) -> ToolSpec:
    return spec(tool_id, parameters={})


def call(ex: Executor, tool_id: str, args: dict[str, Any]) -> Any:
    async def go() -> Any:
        try:
            return await ex.call(S(tool_id), args)
        finally:
            await ex.aclose()

    return asyncio.run(go())


# ------------------------------------------------------------------ HTTP


def test_http_get_fills_the_template_and_query(base: str) -> None:
    ex = HTTPExecutor(endpoints(base), headers={"authorization": "Bearer upstream-key"})
    assert isinstance(ex, Executor)
    out = call(ex, "orders.get", {"order_id": "a/../b c", "expand": True, "tags": ["x", "y"]})
    assert out["method"] == "GET"
    assert out["path"] == "/orders/a%2F..%2Fb%20c"
    assert out["query"] == {"expand": ["true"], "tags": ["x", "y"]}
    assert out["auth"] == "Bearer upstream-key" and out["x_extra"] == "1"


def test_http_post_json_body_and_query_body(base: str) -> None:
    ex = HTTPExecutor(endpoints(base))
    out = call(ex, "orders.create", {"sku": "s1", "qty": 2, "meta": {"a": None}})
    assert out["method"] == "POST" and out["body"] == {"sku": "s1", "qty": 2, "meta": {"a": None}}
    out = call(ex, "orders.query", {"q": "refund"})
    assert out["query"] == {"q": ["refund"]} and out["body"] is None


def test_http_redirects_within_origin_only(base: str) -> None:
    ex = HTTPExecutor(endpoints(base))
    assert call(ex, "redirect.same", {})["path"] == "/orders/7"
    with pytest.raises(ExecutorError) as err:
        call(ex, "redirect.other", {})
    assert err.value.reason == "redirect_refused" and "localhost" in err.value.detail
    with pytest.raises(ExecutorError, match="too many redirects"):
        call(ex, "redirect.loop", {})


def test_http_errors_are_typed(base: str) -> None:
    ex = HTTPExecutor(endpoints(base), max_response_bytes=1_000_000)
    with pytest.raises(ExecutorError) as err:
        call(ex, "fail", {})
    assert err.value.reason == "http_status" and "HTTP 500" in str(err.value)
    # the body is for the audit, not the caller
    assert "internal trouble" not in str(err.value) and "internal trouble" in err.value.detail
    with pytest.raises(ExecutorError) as err:
        call(ex, "big", {})
    assert err.value.reason == "response_too_large"
    assert call(ex, "text", {}) == "héllo"
    with pytest.raises(ExecutorTimeout):
        call(ex, "short", {})
    with pytest.raises(ExecutorError) as err:
        call(ex, "unbound", {})
    assert err.value.reason == "executor_not_bound"
    dead = HTTPExecutor({"x": HTTPEndpoint("GET", "http://127.0.0.1:9/")})
    with pytest.raises(ExecutorError) as err:
        call(dead, "x", {})
    assert err.value.reason == "http_error"


@pytest.mark.parametrize("value", ["", ".", "..", None, {"a": 1}, [1]])
def test_http_url_arguments_cannot_escape_the_path(base: str, value: Any) -> None:
    ex = HTTPExecutor(endpoints(base))
    with pytest.raises(ArgumentError) as err:
        call(ex, "orders.get", {"order_id": value})
    assert err.value.reason == "invalid_url_argument"


def test_http_missing_url_argument(base: str) -> None:
    with pytest.raises(ArgumentError, match="'order_id' is required"):
        call(HTTPExecutor(endpoints(base)), "orders.get", {})


@pytest.mark.parametrize(
    ("method", "url"),
    [("GET", "ftp://x/"), ("GET", "/relative"), ("GET", "https://{host}/x"),
     ("GET", "https://api.test{port}/"), ("TRACE", "https://api.test/")],
)  # fmt: skip
def test_http_endpoint_config_errors(method: str, url: str) -> None:
    with pytest.raises(ConfigError):
        HTTPEndpoint(method, url)


def test_http_slow_call_times_out_while_a_fast_one_completes(base: str, tmp_path: Path) -> None:
    ex = HTTPExecutor(endpoints(base))
    specs = [spec("slow", parameters={}), spec("orders.get")]
    gw, _, audit = gateway(tmp_path, specs, ex, timeout_s=0.5)

    async def both() -> list[Any]:
        try:
            t0 = time.perf_counter()
            out = await asyncio.gather(
                gw.execute(token(), "slow", {}),
                gw.execute(token(), "orders.get", {"order_id": "o1"}),
                return_exceptions=True,
            )
            return [*out, time.perf_counter() - t0]
        finally:
            await gw.aclose()

    slow, fast, elapsed = asyncio.run(both())
    assert isinstance(slow, ExecutorTimeout) and slow.reason == "executor_timeout"
    assert isinstance(fast, ExecutionResult) and fast.value["path"] == "/orders/o1"
    # well before the server's answer (5 s): the time-out ended the call, with room for a
    # loaded machine (it failed at < 1.2 against a 1.5 s answer under load 16)
    assert elapsed < 4.0
    assert {r.tool_id: r.status for r in audit.read()} == {"slow": "timeout", "orders.get": "ok"}


def test_http_client_is_reused_within_a_loop_and_rebuilt_across_loops(base: str) -> None:
    ex = HTTPExecutor(endpoints(base))

    async def twice() -> tuple[Any, Any]:
        a = await ex._clients.get()
        await ex.call(S("text"), {})
        b = await ex._clients.get()
        return a, b

    a, b = asyncio.run(twice())
    assert a is b
    c, _ = asyncio.run(twice())
    assert c is not a
    assert a.is_closed and c.is_closed  # closed when their loops shut down


# ------------------------------------------------------------------ Python


@tool(scopes=["math:use"], aliases=["sum"])
def add(a: int, b: int = 1) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


@tool(id="util.sleep")
def nap(seconds: float) -> str:
    """Sleep in a worker thread."""
    time.sleep(seconds)
    return "rested"


@tool(id="util.async_nap")
async def async_nap(seconds: float) -> str:
    """Sleep on the loop."""
    await asyncio.sleep(seconds)
    return "rested"


def test_tool_decorator_derives_the_spec() -> None:
    s = add.__toolscout_spec__  # type: ignore[attr-defined]
    assert s.id == f"{__name__}.add" and s.card.name == "add"
    assert s.card.summary == "Add two integers." and s.card.scopes == ("math:use",)
    assert s.card.aliases == ("sum",)
    assert s.parameters["properties"]["a"] == {
        "type": "integer",
        "description": "The first addend.",
    }
    assert s.parameters["properties"]["b"]["default"] == 1
    assert s.parameters["required"] == ["a"] and s.parameters["additionalProperties"] is False
    assert add(2, 3) == 5  # the function is unchanged


def test_python_executor_runs_sync_and_async() -> None:
    ex = PythonExecutor([add, nap, async_nap])
    assert {s.id for s in ex.specs()} == {f"{__name__}.add", "util.sleep", "util.async_nap"}
    assert asyncio.run(ex.call(ex.specs()[0], {"a": 2})) == 3


def test_sync_tools_do_not_block_the_loop() -> None:
    ex = PythonExecutor([nap, async_nap])
    sleep_spec, async_spec = ex.specs()

    async def both() -> float:
        t0 = time.perf_counter()
        await asyncio.gather(
            ex.call(sleep_spec, {"seconds": 0.3}), ex.call(async_spec, {"seconds": 0.3})
        )
        return time.perf_counter() - t0

    assert asyncio.run(both()) < 0.55


def test_python_executor_registration() -> None:
    ex = PythonExecutor()

    @ex.tool(id="x.echo", risk="write")
    def echo(text: str) -> str:
        """Echo text."""
        return text

    assert ex.specs()[0].card.risk.value == "write"
    assert asyncio.run(ex.call(ex.specs()[0], {"text": "hi"})) == "hi"

    def other(text: str) -> str:
        """Another."""
        return text

    with pytest.raises(ConfigError):
        ex.register(other, id="x.echo")
    with pytest.raises(ExecutorError) as err:
        asyncio.run(ex.call(spec("x.unknown"), {}))
    assert err.value.reason == "executor_not_bound"
    with pytest.raises(CardError):
        ex.register(lambda: None)  # no docstring, no summary


# ------------------------------------------------------------------ hardening: HTTP


def test_http_keeps_the_endpoints_fixed_query_and_refuses_colliding_arguments(base: str) -> None:
    eps = {
        "search": HTTPEndpoint("GET", base + "/search?tenant=acme&api_version=2"),
        "item": HTTPEndpoint("DELETE", base + "/items/{item}?mode=soft&id={item}"),
        "post": HTTPEndpoint("POST", base + "/things?api_version=2"),
    }
    ex = HTTPExecutor(eps)
    out = call(ex, "search", {"q": "refund", "tags": ["a", "b"]})
    assert out["path"] == "/search"
    assert out["query"] == {"tenant": ["acme"], "api_version": ["2"], "q": ["refund"],
                            "tags": ["a", "b"]}  # fmt: skip
    assert call(ex, "search", {})["query"] == {"tenant": ["acme"], "api_version": ["2"]}
    out = call(ex, "item", {"item": "i 1"})
    assert out["path"] == "/items/i%201" and out["query"] == {"mode": ["soft"], "id": ["i 1"]}
    with pytest.raises(ArgumentError) as err:
        call(ex, "search", {"tenant": "globex"})
    assert err.value.reason == "argument_collides_with_endpoint" and "tenant" in str(err.value)
    with pytest.raises(ArgumentError):
        call(ex, "item", {"item": "x", "mode": "hard"})
    out = call(ex, "post", {"api_version": "body-field"})  # a JSON body field is no collision
    assert out["query"] == {"api_version": ["2"]} and out["body"] == {"api_version": "body-field"}


def test_http_templates_with_default_port_userinfo_or_idn_host_work(base: str) -> None:
    port = base.rsplit(":", 1)[1]
    for url in (
        f"http://127.0.0.1:{port}/orders/{{order_id}}",
        f"http://user:secret@127.0.0.1:{port}/orders/{{order_id}}",
        f"HTTP://127.0.0.1:{port}/orders/{{order_id}}",
    ):
        out = call(HTTPExecutor({"o": HTTPEndpoint("GET", url)}), "o", {"order_id": "7"})
        assert out["path"] == "/orders/7", url
    # no server listens on these: the call must get as far as connecting
    for url in ("http://127.0.0.1:80/x/{id}", "https://bücher.invalid:443/x/{id}"):
        with pytest.raises(ExecutorError) as err:
            call(HTTPExecutor({"o": HTTPEndpoint("GET", url)}, timeout_s=2), "o", {"id": "1"})
        assert err.value.reason == "http_error", url


def test_http_response_bound_holds_for_compressed_bodies(base: str) -> None:
    assert len(BOMB) < 1_000_000
    eps = {
        "bomb": HTTPEndpoint("GET", base + "/gzip-bomb"),
        "ok": HTTPEndpoint("GET", base + "/gzip-ok"),
        "br": HTTPEndpoint("GET", base + "/brotli"),
        "accept": HTTPEndpoint("GET", base + "/accept"),
    }
    ex = HTTPExecutor(eps, max_response_bytes=1_000_000)
    with pytest.raises(ExecutorError) as err:
        call(ex, "bomb", {})
    assert err.value.reason == "response_too_large" and "decompressed" in str(err.value)
    assert call(ex, "ok", {}) == {"ok": True}
    assert call(ex, "accept", {}) == "gzip, deflate"
    with pytest.raises(ExecutorError) as err:
        call(ex, "br", {})
    assert err.value.reason == "http_error"


# ------------------------------------------------------------------ hardening: Python


def test_a_tool_exception_reaches_the_caller_as_a_generic_message() -> None:
    ex = PythonExecutor()

    @ex.tool(id="db.query")
    def query(sql: str) -> str:
        """Run a query."""
        raise RuntimeError("connection to postgres://admin:hunter2@db failed")

    with pytest.raises(ExecutorError) as err:
        asyncio.run(ex.call(ex.specs()[0], {"sql": "select 1"}))
    assert "hunter2" not in str(err.value) and err.value.reason == "tool_failed"
    assert "hunter2" in err.value.detail and "RuntimeError" in err.value.detail


def test_sync_tools_run_on_the_executors_own_bounded_pool() -> None:
    release = threading.Event()
    names: list[str] = []
    ex = PythonExecutor(workers=2, max_queue=1)

    @ex.tool(id="block")
    def block() -> str:
        """Wait for the test."""
        names.append(threading.current_thread().name)
        release.wait(5)
        return "done"

    async def go() -> list[Any]:
        calls = [asyncio.ensure_future(ex.call(ex.specs()[0], {})) for _ in range(3)]
        await asyncio.sleep(0.1)
        assert ex.pending == 3
        with pytest.raises(ExecutorError) as err:  # 2 running + 1 queued: the 4th is refused
            await ex.call(ex.specs()[0], {})
        assert err.value.reason == "executor_busy"
        release.set()
        out = await asyncio.gather(*calls)
        await ex.aclose()
        return out

    assert asyncio.run(go()) == ["done"] * 3
    assert ex.pending == 0
    assert all(n.startswith("toolscout-tool") for n in names)


def test_a_timed_out_thread_keeps_its_in_flight_place_until_it_ends() -> None:
    from toolscout.gateway.limits import CURRENT_TICKET, InFlight
    from toolscout.policy import Principal

    release = threading.Event()
    ex = PythonExecutor()

    @ex.tool(id="stuck")
    def stuck() -> str:
        """Wait for the test."""
        release.wait(5)
        return "late"

    flight = InFlight(per_principal=1, per_tool=10)
    alice = Principal.of("alice", "acme")

    async def go() -> None:
        ticket = flight.enter(alice, "stuck")
        CURRENT_TICKET.set(ticket)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await ex.call(ex.specs()[0], {})
        ticket.release()  # the gateway gives up its hold on time-out...
        assert flight.running(alice) == 1  # ...but the thread still runs
        release.set()
        for _ in range(100):
            if flight.running(alice) == 0:
                break
            await asyncio.sleep(0.02)
        assert flight.running(alice) == 0
        await ex.aclose()

    asyncio.run(go())
