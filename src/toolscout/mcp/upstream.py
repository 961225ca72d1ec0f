"""Upstream MCP servers: connections kept alive, tools turned into cards, faults isolated.

One :class:`Upstream` per configured server owns a background *supervisor* task
that connects through the official SDK ``Client`` (a stdio subprocess or
streamable HTTP), lists the tools, watches for ``tools/list_changed`` (a
``subscriptions/listen`` stream on 2026-07-28 servers, the notification on
handshake-era ones, and a periodic re-list as a fallback), and reconnects with
exponential back-off when the connection breaks. Start-up waits at most
``connect_timeout_s`` per server; a server that comes up later has its tools
indexed then.

Each tool list becomes cards through :mod:`toolscout.mcp.cards`.

:class:`Upstreams` is the gateway's executor (bound as ``"*"``): it routes a
call to its server, under a time-out and a result-size cap, and turns every
upstream fault into an :class:`~toolscout.errors.ExecutorError` naming the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from toolscout.cards import ToolSpec
from toolscout.errors import ExecutorError
from toolscout.mcp.cards import UpstreamTool, specs_from_tools
from toolscout.mcp.config import GatewayConfig, ServerConfig

__all__ = ["Upstream", "UpstreamTool", "Upstreams"]

log = logging.getLogger(__name__)

# reason codes of the ExecutorErrors raised here (the executors' own codes, same values)
TOOL_FAILED = "tool_failed"
RESPONSE_TOO_LARGE = "response_too_large"
UPSTREAM_UNAVAILABLE = "upstream_unavailable"
UPSTREAM_TIMEOUT = "upstream_timeout"

#: seconds between re-lists of a connected server (catches changes it does not announce)
POLL_S = 5.0
#: back-off between reconnect attempts: first, factor, ceiling (seconds)
BACKOFF = (0.2, 2.0, 15.0)

# --------------------------------------------------------------------------- one upstream


@asynccontextmanager
async def _http(url: str, headers: Mapping[str, str]) -> AsyncIterator[Any]:
    from mcp.client.streamable_http import streamable_http_client

    if not headers:
        async with streamable_http_client(url) as streams:
            yield streams
        return
    import httpx2  # the mcp SDK's HTTP client

    async with (
        httpx2.AsyncClient(headers=dict(headers), timeout=httpx2.Timeout(30.0, read=300.0)) as c,
        streamable_http_client(url, http_client=c) as streams,
    ):
        yield streams


class Upstream:
    """One upstream server: its supervised connection, its tools, its calls."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        max_result_bytes: int = 256 * 1024,
        on_tools: Callable[[Upstream], Awaitable[None]] | None = None,
        errlog: TextIO | None = None,
        poll_s: float = POLL_S,
    ) -> None:
        self.config = config
        self.name = config.name
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_result_bytes = max_result_bytes
        self.on_tools = on_tools
        self.errlog = errlog
        self.poll_s = poll_s
        self.state = "down"
        self.last_error = ""
        self.connects = 0
        self.tools: dict[str, UpstreamTool] = {}
        #: the upstream's resources and prompts (wire form), passed through by the gateway
        self.resources: list[dict[str, Any]] = []
        self.prompts: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.listed = asyncio.Event()
        #: set once the first attempt to connect and list has ended, either way
        self.tried = asyncio.Event()
        self._client: Any = None
        self._digest = ""
        self._broken = asyncio.Event()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def label(self) -> str:
        return f"MCP server {self.name!r}"

    def _client_factory(self) -> Any:
        from mcp import Client, Implementation, StdioServerParameters
        from mcp.client.stdio import stdio_client

        cfg = self.config
        if cfg.url:
            transport: Any = _http(cfg.url, cfg.headers)
        else:
            assert cfg.command is not None
            params = StdioServerParameters(
                command=resolve_command(cfg.command, cfg.env), args=list(cfg.args),
                env=dict(cfg.env or {}) or None, cwd=cfg.cwd,
            )  # fmt: skip
            transport = stdio_client(params, errlog=self.errlog or sys.stderr)
        return Client(
            transport,
            client_info=Implementation(name="toolscout-gateway", version="0.1.0"),
            message_handler=self._on_message,
            cache=None,
        )

    async def _on_message(self, message: Any) -> None:
        method = getattr(message, "method", "")
        if method == "notifications/tools/list_changed":
            self._changed.set()
        elif isinstance(message, Exception):
            self._broken.set()

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._supervise(), name=f"toolscout-upstream-{self.name}"
            )

    async def wait_listed(self, timeout_s: float) -> bool:
        """Wait until the first attempt ended (bounded by ``timeout_s``); True if listed."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self.tried.wait()
        return self.listed.is_set()

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=5.0)
        self.state, self._client = "down", None

    async def _supervise(self) -> None:
        delay = BACKOFF[0]
        while True:
            started = time.monotonic()
            try:
                await self._connected_session()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # an upstream fault never ends the gateway
                self.last_error = _describe(exc)
                log.warning("%s: %s", self.label, self.last_error)
            self.state, self._client = "down", None
            self.tried.set()
            if time.monotonic() - started > 10 * delay:
                delay = BACKOFF[0]  # it was up for a while: start the back-off again
            await asyncio.sleep(delay)
            delay = min(delay * BACKOFF[1], BACKOFF[2])

    async def _connected_session(self) -> None:
        self.state = "connecting"
        self._broken.clear()
        client = self._client_factory()
        async with contextlib.AsyncExitStack() as stack:
            async with asyncio.timeout(self.connect_timeout_s):
                await stack.enter_async_context(client)
                self._client = client
                wires = await self._fetch()
                await self._fetch_extras()
            self.state = "up"
            self.connects += 1
            self.last_error = ""
            await self._apply(wires)
            watcher = asyncio.get_running_loop().create_task(self._listen(client))
            stack.callback(watcher.cancel)
            await self._watch()

    async def _listen(self, client: Any) -> None:
        """On a 2026-07-28 connection, follow ``subscriptions/listen`` for tool changes."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return
        caps = client.server_capabilities
        if caps.tools is None or not caps.tools.list_changed:
            return
        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _ in sub:
                    self._changed.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            from mcp.client.subscriptions import SubscriptionLost

            log.info("%s: listen stream ended: %s", self.label, _describe(exc))
            if isinstance(exc, SubscriptionLost):  # the connection went: reconnect now
                self.last_error = "the connection was lost"
                self._broken.set()

    async def _watch(self) -> None:
        """Serve until the connection breaks; re-list on a change or every ``poll_s``."""
        while True:
            broken = asyncio.ensure_future(self._broken.wait())
            changed = asyncio.ensure_future(self._changed.wait())
            try:
                await asyncio.wait(
                    {broken, changed}, timeout=self.poll_s, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                broken.cancel()
                changed.cancel()
            if self._broken.is_set():
                raise ConnectionError(self.last_error or "the connection broke")
            self._changed.clear()
            async with asyncio.timeout(self.timeout_s):
                wires = await self._fetch()
                await self._fetch_extras()
            await self._apply(wires)

    async def _fetch(self) -> list[dict[str, Any]]:
        """The upstream's tools in wire form (every page)."""
        client = self._client
        wires: list[dict[str, Any]] = []
        cursor = None
        for _ in range(100):
            page = await client.list_tools(cursor=cursor)
            wires += [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools
            ]
            cursor = page.next_cursor
            if cursor is None:
                break
        return wires

    async def _fetch_extras(self) -> None:
        """Resources and prompts, when the upstream offers them (a failure is only logged)."""
        from mcp import MCPError

        client = self._client
        caps = client.server_capabilities
        try:
            if caps.resources is not None:
                page = await client.list_resources()
                self.resources = [_wire(r) for r in page.resources]
            if caps.prompts is not None:
                page = await client.list_prompts()
                self.prompts = [_wire(p) for p in page.prompts]
        except MCPError as exc:
            log.info("%s: cannot list resources or prompts: %s", self.label, exc)

    async def _apply(self, wires: list[dict[str, Any]]) -> None:
        """New cards if the list changed, then ``on_tools`` (outside any time-out: it indexes)."""
        digest = hashlib.sha256(json.dumps(wires, sort_keys=True).encode()).hexdigest()
        if digest != self._digest or not self.listed.is_set():
            tools, warnings = specs_from_tools(self.config, wires)
            self.tools = {t.spec.id: t for t in tools}
            self.warnings = warnings
            self._digest = digest
            if self.on_tools is not None:
                await self.on_tools(self)
        self.listed.set()
        self.tried.set()

    # -- calls -----------------------------------------------------------------
    def unavailable(self, tool: str, why: str) -> ExecutorError:
        return ExecutorError(
            f"upstream {self.label} is unavailable ({why}); its other tools fail the same way "
            "until it reconnects",
            tool_id=tool,
            reason=UPSTREAM_UNAVAILABLE,
        )

    async def request(self, what: str, send: Callable[[Any], Awaitable[Any]]) -> dict[str, Any]:
        """One pass-through request (a resource read, a prompt): its result as a wire dict."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        client = self._client
        if client is None or self.state != "up":
            raise self.unavailable(what, self.last_error or self.state)
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await send(client)
        except TimeoutError:
            raise ExecutorError(
                f"upstream {self.label} did not answer {what} within {self.timeout_s:g}s",
                tool_id=what,
                reason=UPSTREAM_TIMEOUT,
            ) from None
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._broken.set()
                raise self.unavailable(what, "the connection closed") from None
            raise ExecutorError(
                f"upstream {self.label} refused {what}: {exc}", tool_id=what, reason=TOOL_FAILED
            ) from None
        except Exception as exc:
            self.last_error = _describe(exc)
            self._broken.set()
            raise self.unavailable(what, self.last_error) from None
        wire = _wire(result)
        size = len(json.dumps(wire, separators=(",", ":")).encode())
        if size > self.max_result_bytes:
            raise ExecutorError(
                f"{what} is {size} bytes, over the gateway's cap of {self.max_result_bytes}",
                tool_id=what,
                reason=RESPONSE_TOO_LARGE,
            )
        return wire

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run one tool; the MCP ``CallToolResult`` as a wire dict, or ExecutorError."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        tool = self.tools.get(spec.id)
        name = tool.name if tool is not None else spec.card.name
        client = self._client
        if client is None or self.state != "up":
            raise self.unavailable(spec.id, self.last_error or self.state)
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await client.call_tool(name, dict(arguments))
        except TimeoutError:
            raise ExecutorError(
                f"upstream {self.label} did not answer {name!r} within {self.timeout_s:g}s",
                tool_id=spec.id,
                reason=UPSTREAM_TIMEOUT,
            ) from None
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self.last_error = "the connection closed"
                self._broken.set()
                raise self.unavailable(spec.id, self.last_error) from None
            raise ExecutorError(
                f"upstream {self.label} refused {name!r}: {exc}",
                tool_id=spec.id,
                reason=TOOL_FAILED,
            ) from None
        except Exception as exc:
            self.last_error = _describe(exc)
            self._broken.set()
            raise self.unavailable(spec.id, self.last_error) from None
        wire: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        size = len(json.dumps(wire, separators=(",", ":")).encode())
        if size > self.max_result_bytes:
            raise ExecutorError(
                f"the result of {spec.id} is {size} bytes, over the gateway's cap of "
                f"{self.max_result_bytes}",
                tool_id=spec.id,
                reason=RESPONSE_TOO_LARGE,
            )
        if result.is_error:
            texts = [b.text for b in result.content if getattr(b, "type", "") == "text"]
            raise ExecutorError(
                f"{spec.id} failed upstream ({self.name}): {' '.join(texts)[:500]}",
                tool_id=spec.id,
                reason=TOOL_FAILED,
            )
        return wire


def resolve_command(command: str, env: Mapping[str, str] | None = None) -> str:
    """A bare command not on ``PATH`` is looked up beside this Python interpreter too, so
    servers installed into toolscout's own environment (``mcp-server-time``) start even
    when that environment is not activated (as when a desktop client launches us)."""
    if os.sep in command or shutil.which(command, path=(env or {}).get("PATH")):
        return command
    beside = Path(sys.executable).parent / command
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else command


def _wire(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


def _describe(exc: BaseException) -> str:
    """One line about a (possibly grouped) exception."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------- all of them


@dataclass
class Upstreams:
    """Every configured upstream, and the executor that routes calls to them."""

    config: GatewayConfig
    on_tools: Callable[[Upstream], Awaitable[None]] | None = None
    errlog: TextIO | None = None
    poll_s: float = POLL_S
    servers: dict[str, Upstream] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for sc in self.config.servers:
            self.servers[sc.prefix] = Upstream(
                sc,
                timeout_s=self.config.timeout_s,
                connect_timeout_s=self.config.connect_timeout_s,
                max_result_bytes=self.config.max_result_bytes,
                on_tools=self.on_tools,
                errlog=self.errlog,
                poll_s=self.poll_s,
            )

    async def start(self, *, wait_s: float | None = None) -> None:
        """Start every supervisor; wait (bounded) for the first tool lists."""
        for up in self.servers.values():
            up.start()
        limit = self.config.connect_timeout_s if wait_s is None else wait_s
        await asyncio.gather(*(up.wait_listed(limit) for up in self.servers.values()))

    def owner(self, tool_id: str) -> Upstream | None:
        prefix = tool_id.split("/", 1)[0] + "/"
        return self.servers.get(prefix)

    def tools(self) -> dict[str, UpstreamTool]:
        out: dict[str, UpstreamTool] = {}
        for up in self.servers.values():
            out.update(up.tools)
        return out

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> dict[str, Any]:
        up = self.owner(spec.id)
        if up is None:
            raise ExecutorError(
                f"no upstream serves {spec.id}", tool_id=spec.id, reason=UPSTREAM_UNAVAILABLE
            )
        return await up.call(spec, arguments)

    async def aclose(self) -> None:
        await asyncio.gather(*(up.aclose() for up in self.servers.values()))
