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
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from toolscout.cards import ToolSpec
from toolscout.errors import ExecutorError
from toolscout.mcp.cards import UpstreamTool, specs_from_tools
from toolscout.mcp.config import GatewayConfig, ServerConfig
from toolscout.mcp.relay import LINK, Link
from toolscout.redact import redact

__all__ = ["Upstream", "UpstreamTool", "Upstreams"]

log = logging.getLogger(__name__)

# reason codes of the ExecutorErrors raised here (the executors' own codes, same values)
TOOL_FAILED = "tool_failed"
RESPONSE_TOO_LARGE = "response_too_large"
UPSTREAM_UNAVAILABLE = "upstream_unavailable"
UPSTREAM_TIMEOUT = "upstream_timeout"

#: seconds between re-lists of a connected server (catches changes it does not announce)
POLL_S = 5.0
#: upstream notifications handed to the gateway (it passes them on to its clients)
PASSED_ON = (
    "notifications/resources/updated",
    "notifications/resources/list_changed",
    "notifications/prompts/list_changed",
)
#: pids of the stdio servers the connections here started (their process groups)
SPAWNED: set[int] = set()
#: callers' own upstream sessions kept (the least recently used is closed past this)
MAX_PRIVATE = 256
#: a caller's own session re-lists rarely: its tools are indexed from the shared one
PRIVATE_POLL_S = 300.0
#: longest one connection attempt may take (start-up waits only connect_timeout_s for it)
CONNECT_ATTEMPT_S = 600.0
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
        on_notify: Callable[[Upstream, Any], Awaitable[None]] | None = None,
    ) -> None:
        self.config = config
        self.on_notify = on_notify
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
        self.templates: list[dict[str, Any]] = []
        #: the upstream's own instructions (merged into the gateway's)
        self.instructions = ""
        self.warnings: list[str] = []
        self.listed = asyncio.Event()
        #: set once the first attempt to connect and list has ended, either way
        self.tried = asyncio.Event()
        self._client: Any = None
        self._digest = ""
        self._broken = asyncio.Event()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: the callers' requests in flight here (server-to-client traffic goes to the last)
        self.active: list[Link] = []

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
            # relayed to the caller whose request the upstream is serving (mcp/relay.py)
            sampling_callback=self._on_sampling,
            elicitation_callback=self._on_elicitation,
            list_roots_callback=self._on_roots,
            logging_callback=self._on_log,
        )

    # -- server-to-client traffic, relayed to the caller being served -------------
    def _target(self) -> Link | None:
        """The caller whose request this upstream serves (the latest one in flight)."""
        return self.active[-1] if self.active else None

    async def _relay(self, capability: str, request: Any, result_type: type[Any]) -> Any:
        from mcp import MCPError
        from mcp.types import INVALID_REQUEST, ErrorData

        link = self._target()
        if link is None or not link.client_supports(capability):
            return ErrorData(
                code=INVALID_REQUEST,
                message=f"the client behind the toolscout gateway does not support {capability}",
            )
        try:
            return await link.ask(request, result_type)
        except MCPError as exc:
            return ErrorData(code=exc.code, message=exc.message, data=exc.data)

    async def _on_sampling(self, context: Any, params: Any) -> Any:
        from mcp.types import CreateMessageRequest, CreateMessageResult

        return await self._relay(
            "sampling", CreateMessageRequest(params=params), CreateMessageResult
        )

    async def _on_elicitation(self, context: Any, params: Any) -> Any:
        from mcp.types import ElicitRequest, ElicitResult

        return await self._relay("elicitation", ElicitRequest(params=params), ElicitResult)

    async def _on_roots(self, context: Any) -> Any:
        from mcp.types import ListRootsRequest, ListRootsResult

        return await self._relay("roots", ListRootsRequest(), ListRootsResult)

    async def _on_log(self, params: Any) -> None:
        link = self._target()
        if link is not None:
            with contextlib.suppress(Exception):  # a gone caller: the log line is dropped
                await link.log(params)

    async def _on_message(self, message: Any) -> None:
        method = getattr(message, "method", "")
        if method == "notifications/tools/list_changed":
            self._changed.set()
        elif isinstance(message, Exception):
            self._broken.set()
        elif method in PASSED_ON and self.on_notify is not None:
            with contextlib.suppress(Exception):  # a gone client must not break this link
                await self.on_notify(self, message)

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._supervise(), name=f"toolscout-upstream-{self.name}"
            )

    async def wait_listed(self, timeout_s: float) -> bool:
        """Wait until the first attempt ended (bounded by ``timeout_s``, unless the server is
        up and its tools are being indexed: that is our own work and is waited for)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self.tried.wait()
        if not self.tried.is_set() and self.state == "up":
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CONNECT_ATTEMPT_S):
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
            # start-up waits connect_timeout_s for this (Upstreams.start); the attempt itself
            # goes on, so a server slow to start (a cold npx, a JVM) still comes up
            before = _leaders() if self.config.command else set()
            async with asyncio.timeout(CONNECT_ATTEMPT_S):
                await stack.enter_async_context(client)
                if self.config.command:  # the stdio server process(es) it started
                    SPAWNED.update(_leaders() - before)
                self._client = client
                self.instructions = redact((client.instructions or "").strip())
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
        """Resources, templates and prompts (every page), when offered (failures are logged)."""
        from mcp import MCPError

        client = self._client
        caps = client.server_capabilities
        try:
            if caps.resources is not None:
                self.resources = await _pages(client.list_resources, "resources")
                try:
                    self.templates = await _pages(
                        client.list_resource_templates, "resource_templates"
                    )
                except MCPError:
                    self.templates = []
            if caps.prompts is not None:
                self.prompts = await _pages(client.list_prompts, "prompts")
        except MCPError as exc:
            log.info("%s: cannot list resources or prompts: %s", self.label, redact(str(exc)))

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
        if self.state == "connecting" and not self.listed.is_set():
            why = (
                f"still starting: not up within connect_timeout_s={self.connect_timeout_s:g}s, "
                "its tools appear when it is"
            )
        return ExecutorError(
            f"upstream {self.label} is unavailable ({why}); its other tools fail the same way "
            "until it reconnects",
            tool_id=tool,
            reason=UPSTREAM_UNAVAILABLE,
        )

    async def raw(self, what: str, send: Callable[[Any], Awaitable[Any]]) -> Any:
        """One request upstream, its answer as the SDK gives it."""
        return await self._send(what, what, send, self.timeout_s, LINK.get())

    async def request(self, what: str, send: Callable[[Any], Awaitable[Any]]) -> dict[str, Any]:
        """One pass-through request (a resource read, a prompt): its result as a wire dict."""
        result = await self._send(what, what, send, self.timeout_s, LINK.get())
        wire = _wire(result)
        self._check_size(what, what, wire, self.max_result_bytes)
        return wire

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run one tool; the MCP ``CallToolResult`` as a wire dict, or ExecutorError.

        The caller's progress reaches it (through :data:`~toolscout.mcp.relay.LINK`) and
        moves the deadline: the call fails only after ``timeout_s`` without progress."""
        tool = self.tools.get(spec.id)
        name = tool.name if tool is not None else spec.card.name
        link = LINK.get()
        timeout = self.timeout_for(name)

        async def send(client: Any) -> Any:
            progress = link.progress if link is not None else None
            return await client.call_tool(name, dict(arguments), progress_callback=progress)

        result = await self._send(spec.id, repr(name), send, timeout, link)
        wire: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        self._check_size(spec.id, f"the result of {spec.id}", wire, self.max_result_bytes)
        if result.is_error:
            redacted = _redacted(wire)
            texts = [b.get("text", "") for b in redacted.get("content", []) if "text" in b]
            if link is not None:
                link.error = redacted
            raise ExecutorError(
                f"{spec.id} failed upstream ({self.name}): {' '.join(texts)}",
                tool_id=spec.id,
                reason=TOOL_FAILED,
                detail=" ".join(texts),
            )
        return wire

    def timeout_for(self, tool: str) -> float:
        """The time-out of one tool: its own rule's, else the server's, else the gateway's."""
        own = self.config.policy.timeout_for(tool)
        return own if own is not None else self.timeout_s

    async def _send(
        self,
        what_id: str,
        what: str,
        send: Callable[[Any], Awaitable[Any]],
        timeout: float,
        link: Link | None,
    ) -> Any:
        """One request upstream: faults as ExecutorErrors; the deadline moves with progress."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        client = self._client
        if client is None or self.state != "up":
            raise self.unavailable(what_id, self.last_error or self.state)
        if link is not None:
            self.active.append(link)
        task = asyncio.ensure_future(send(client))
        try:
            while True:
                started = time.monotonic()
                done, _ = await asyncio.wait({task}, timeout=timeout)
                if done:
                    return task.result()
                seen = link.last_seen if link is not None else 0.0
                if seen <= started:  # no progress within the whole window
                    raise TimeoutError
                timeout = max(0.01, seen + self._window(what_id) - time.monotonic())
        except TimeoutError:
            raise ExecutorError(
                f"upstream {self.label} did not answer {what} within {self._window(what_id):g}s "
                "(no progress either); raise timeout_s for this server or tool",
                tool_id=what_id,
                reason=UPSTREAM_TIMEOUT,
            ) from None
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self.last_error = "the connection closed"
                self._broken.set()
                raise self.unavailable(what_id, self.last_error) from None
            text = redact(str(exc))
            raise ExecutorError(
                f"upstream {self.label} refused {what}: {text}",
                tool_id=what_id,
                reason=TOOL_FAILED,
                detail=text,
            ) from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.last_error = redact(_describe(exc))
            self._broken.set()
            raise self.unavailable(what_id, self.last_error) from None
        finally:
            if not task.done():
                task.cancel()  # the SDK sends notifications/cancelled upstream
            if link is not None and link in self.active:
                self.active.remove(link)

    def _window(self, what_id: str) -> float:
        tool = self.tools.get(what_id)
        return self.timeout_for(tool.name) if tool is not None else self.timeout_s

    @staticmethod
    def _check_size(what_id: str, what: str, wire: dict[str, Any], cap: int) -> None:
        size = len(json.dumps(wire, separators=(",", ":")).encode())
        if size > cap:
            raise ExecutorError(
                f"{what} is {size} bytes, over this server's max_result_bytes ({cap}); raise it "
                "in the server's toolscout section",
                tool_id=what_id,
                reason=RESPONSE_TOO_LARGE,
            )


async def _pages(fetch: Callable[..., Awaitable[Any]], attr: str) -> list[dict[str, Any]]:
    """Every page of a paginated list, in wire form."""
    out: list[dict[str, Any]] = []
    cursor = None
    for _ in range(1000):
        page = await fetch(cursor=cursor)
        out += [_wire(item) for item in getattr(page, attr)]
        cursor = page.next_cursor
        if cursor is None:
            break
    return out


def resolve_command(command: str, env: Mapping[str, str] | None = None) -> str:
    """A bare command not on ``PATH`` is looked up beside this Python interpreter too, so
    servers installed into toolscout's own environment (``mcp-server-time``) start even
    when that environment is not activated (as when a desktop client launches us)."""
    if os.sep in command or shutil.which(command, path=(env or {}).get("PATH")):
        return command
    beside = Path(sys.executable).parent / command
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else command


def _redacted(value: Any) -> Any:
    """A wire value with secrets taken out of every string in it."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v) if k != "data" else v for k, v in value.items()}
    return value


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
    on_notify: Callable[[Upstream, Any], Awaitable[None]] | None = None
    servers: dict[str, Upstream] = field(default_factory=dict)
    #: (server prefix, caller key) → that caller's own session with the server
    private: OrderedDict[tuple[str, str], Upstream] = field(default_factory=OrderedDict)

    def __post_init__(self) -> None:
        for sc in self.config.servers:
            self.servers[sc.prefix] = Upstream(
                sc,
                timeout_s=sc.policy.timeout_s or self.config.timeout_s,
                connect_timeout_s=self.config.connect_timeout_s,
                max_result_bytes=sc.policy.max_result_bytes or self.config.max_result_bytes,
                on_tools=self.on_tools,
                errlog=self.errlog,
                poll_s=self.poll_s,
                on_notify=self.on_notify,
            )

    async def start(self, *, wait_s: float | None = None) -> None:
        """Start every supervisor; wait (bounded) for the first tool lists."""
        for up in self.servers.values():
            up.start()
        limit = self.config.connect_timeout_s if wait_s is None else wait_s
        listed = await asyncio.gather(*(up.wait_listed(limit) for up in self.servers.values()))
        for up, ok in zip(self.servers.values(), listed, strict=True):
            if not ok and up.state == "connecting":
                log.warning(
                    "%s: not up within connect_timeout_s=%gs; still connecting in the background "
                    "(its tools are indexed when it comes up)",
                    up.label,
                    limit,
                )

    async def ready(
        self, *, wait_s: float | None = None, skip: frozenset[str] = frozenset()
    ) -> None:
        """Wait (at most ``connect_timeout_s``) for the first attempt of each server still
        starting: a request right after start-up sees what the servers offer."""
        limit = self.config.connect_timeout_s if wait_s is None else wait_s
        pending = [
            up
            for up in self.servers.values()
            if not up.tried.is_set() and up.config.prefix not in skip
        ]
        if pending:
            await asyncio.gather(*(up.wait_listed(limit) for up in pending))

    async def route(self, up: Upstream, caller: str | None = None) -> Upstream:
        """The session a request goes over: the caller's own when ``caller`` (or the
        request's link) names one (HTTP callers each get theirs), else the shared one."""
        if caller is None:
            link = LINK.get()
            caller = link.caller if link is not None else None
        if caller is None:
            return up
        key = (up.config.prefix, caller)
        own = self.private.get(key)
        if own is None:
            own = self.private[key] = Upstream(
                up.config,
                timeout_s=up.timeout_s,
                connect_timeout_s=up.connect_timeout_s,
                max_result_bytes=up.max_result_bytes,
                errlog=self.errlog,
                poll_s=PRIVATE_POLL_S,
                on_notify=self.on_notify,
            )
            own.start()
            while len(self.private) > MAX_PRIVATE:
                _, old = self.private.popitem(last=False)
                asyncio.get_running_loop().create_task(old.aclose())
        else:
            self.private.move_to_end(key)
        await own.wait_listed(self.config.connect_timeout_s)
        return own

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
        return await (await self.route(up)).call(spec, arguments)

    async def aclose(self) -> None:
        every = [*self.servers.values(), *self.private.values()]
        self.private.clear()
        await asyncio.gather(*(up.aclose() for up in every))
        kill_children()


def kill_children() -> int:
    """Kill the process group of every stdio server this process started and still has.

    The SDK starts each stdio server in its own session (so a terminal's Ctrl-C does not
    reach it) and stops it when its connection closes; a connection abandoned mid-call
    or a gateway stopped by a signal could leave one running. Each connection records
    the session leaders it started (:data:`SPAWNED`). Returns how many were killed."""
    import signal

    killed = 0
    for pid in sorted(_leaders() & SPAWNED):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
            killed += 1
    SPAWNED.clear()
    return killed


def _leaders() -> set[int]:
    """This process's children that lead their own session (how the SDK starts servers)."""
    me = os.getpid()
    return {pid for pid, ppid, sid in _children_of(me) if ppid == me and sid == pid}


def _children_of(parent: int) -> list[tuple[int, int, int]]:
    """(pid, ppid, session id) of ``parent``'s children, from ``/proc`` (Linux; else none)."""
    out: list[tuple[int, int, int]] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return out
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 3 and int(fields[1]) == parent:
            out.append((int(entry.name), int(fields[1]), int(fields[3])))
    return out
