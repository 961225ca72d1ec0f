"""One upstream MCP server's supervised connection: connect, list, watch, reconnect.

A :class:`Supervisor` (the base of :class:`~toolscout.mcp.connection.Upstream`, which adds
the requests sent over it) owns a background task that connects through
the official SDK ``Client`` (a stdio subprocess or streamable HTTP), lists the
tools, watches for ``tools/list_changed`` (a ``subscriptions/listen`` stream on
2026-07-28 servers, the notification on handshake-era ones, and a periodic
re-list as a fallback), and reconnects with exponential back-off when the
connection breaks (a request that finds a remote server down asks for the next attempt
at once: :meth:`Supervisor.reconnect_now`). Each tool list becomes cards through
:mod:`toolscout.mcp.cards`. Its server-to-client traffic goes through its
:class:`~toolscout.mcp.relay.Relay`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from toolscout.mcp.cards import UpstreamTool, specs_from_tools
from toolscout.mcp.config import ServerConfig
from toolscout.mcp.lean import LeanStdio, lean_enabled
from toolscout.mcp.processes import SPAWNED, leaders, resolve_command
from toolscout.mcp.relay import Relay
from toolscout.mcp.timeline import mark
from toolscout.mcp.wire import Notice, describe, observe, pages
from toolscout.redact import redact

__all__ = ["BACKOFF", "MIN_RETRY_S", "POLL_S", "RECONNECT_WAIT_S", "TASK_STATUS", "Supervisor"]

log = logging.getLogger(__name__)

#: seconds between re-lists of a connected server (catches changes it does not announce)
POLL_S = 5.0
#: upstream notifications handed to the gateway (it passes them on to its clients)
PASSED_ON = (
    "notifications/resources/updated",
    "notifications/resources/list_changed",
    "notifications/prompts/list_changed",
)
#: a task's status changed (2025-11-25): passed on to the caller session that created it
TASK_STATUS = "notifications/tasks/status"
#: longest one connection attempt may take (start-up waits only connect_timeout_s for it)
CONNECT_ATTEMPT_S = 600.0
#: back-off between reconnect attempts: first, factor, ceiling (seconds)
BACKOFF = (0.2, 2.0, 15.0)
#: the longest a request waits for the attempt to reconnect it asked for (:meth:`reconnect_now`)
RECONNECT_WAIT_S = 5.0
#: the least time between two attempts, however many requests ask for the server
MIN_RETRY_S = 0.2


class Supervisor:
    """One upstream server's supervised connection and what it lists (tools, resources,
    prompts); :class:`~toolscout.mcp.connection.Upstream` sends requests over it."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        on_tools: Callable[[Any], Awaitable[None]] | None = None,
        errlog: TextIO | None = None,
        poll_s: float = POLL_S,
        on_notify: Callable[[Any, Any], Awaitable[None]] | None = None,
        capabilities: frozenset[str] | None = None,
    ) -> None:
        self.config = config
        self.on_notify = on_notify
        self.name = config.name
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
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
        #: the stdio transport of the current connection, when it is the gateway's own
        self._lean: LeanStdio | None = None
        self._digest = ""
        self._broken = asyncio.Event()
        self._changed = asyncio.Event()
        #: a request that found the server down cuts the back-off short (:meth:`reconnect_now`)
        self._wake = asyncio.Event()
        #: attempts to connect that have ended, up or not, and the event the next one sets
        self._settles = 0
        self._settled = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        #: monotonic time the supervisor started (the start-up window runs from here)
        self._started = 0.0
        #: server-to-client traffic (sampling, elicitation, roots, logs) to the caller served
        self.relay = Relay(capabilities)

    @property
    def client(self) -> Any:
        """The SDK ``Client`` while connected, else ``None``."""
        return self._client if self.state == "up" else None

    @property
    def label(self) -> str:
        return f"MCP server {self.name!r}"

    def _client_factory(self) -> Any:
        from mcp import Client, Implementation, StdioServerParameters
        from mcp.client.stdio import stdio_client

        cfg = self.config
        if cfg.url:
            from toolscout.executors.mcp import http_streams  # HTTP upstreams only

            transport: Any = http_streams(cfg.url, cfg.headers)
        else:
            assert cfg.command is not None
            params = StdioServerParameters(
                command=resolve_command(cfg.command, cfg.env), args=list(cfg.args),
                env=dict(cfg.env or {}) or None, cwd=cfg.cwd,
            )  # fmt: skip
            if lean_enabled():  # the gateway's own tools/call over it (mcp/lean.py)
                self._lean = LeanStdio(params, self.errlog or sys.stderr)
                transport = self._lean.streams()
            else:
                self._lean = None
                transport = stdio_client(params, errlog=self.errlog or sys.stderr)
        client = Client(
            transport,
            client_info=Implementation(name="toolscout-gateway", version="0.1.0"),
            message_handler=self._on_message,
            cache=None,
            # relayed to the caller this session serves; declared as that caller's client does
            **self.relay.callbacks(),
        )
        observe(client, TASK_STATUS, self._on_task_status)
        return client

    async def _on_task_status(self, params: dict[str, Any]) -> None:
        if self.on_notify is not None:
            with contextlib.suppress(Exception):  # a gone client must not break this link
                await self.on_notify(self, Notice(TASK_STATUS, params))

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
            self._started = time.monotonic()
            self._task = asyncio.get_running_loop().create_task(
                self._supervise(), name=f"toolscout-upstream-{self.name}"
            )

    def wanted(self) -> None:
        """A request needs this server: start its supervisor if it was never started (a
        start put off while the stored catalog answers) and it is not closed."""
        if self._task is None and not self._closed:
            self.start()

    async def wait_listed(self, timeout_s: float) -> bool:
        """Wait until the first attempt ended (bounded by ``timeout_s``, unless the server is
        up and its tools are being indexed: that is our own work and is waited for)."""
        if self.tried.is_set():  # every call after the first: no time-out scope to set up
            return self.listed.is_set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self.tried.wait()
        if not self.tried.is_set() and self.state == "up":
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CONNECT_ATTEMPT_S):
                    await self.tried.wait()
        return self.listed.is_set()

    async def until_up(self) -> None:
        """Within ``connect_timeout_s`` of this session's start, wait for its first
        connection: a request right after start-up (when the stored catalog answered the
        lists at once) waits for the server, retries of a failed first attempt included,
        instead of failing. Later, a server that is down fails a request at once."""
        if self.listed.is_set() or self._task is None:
            return
        left = self._started + self.connect_timeout_s - time.monotonic()
        if left > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self.listed.wait()

    async def aclose(self) -> None:
        self._closed = True
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
                # but a close does: inside the client's task groups the cancellation
                # can surface as another error (a failed reconnect's), not CancelledError;
                # the supervision then ends, with nothing left for anyone to retrieve
                task = asyncio.current_task()
                if self._closed or (task is not None and task.cancelling()):
                    return
                self.last_error = describe(exc)
                log.warning("%s: %s", self.label, self.last_error)
            self.state, self._client = "down", None
            self._settle()
            self.tried.set()
            if time.monotonic() - started > 10 * delay:
                delay = BACKOFF[0]  # it was up for a while: start the back-off again
            await self._back_off(delay)
            delay = min(delay * BACKOFF[1], BACKOFF[2])

    async def _back_off(self, delay: float) -> None:
        """Wait ``delay`` before the next attempt, or less when a request asks for the server
        meanwhile (:meth:`reconnect_now`): still :data:`MIN_RETRY_S` after the attempt that
        failed, so requests to a server that is down cannot make attempts back to back."""
        ended = time.monotonic()
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._wake.wait()
        rest = ended + MIN_RETRY_S - time.monotonic()
        if rest > 0:
            await asyncio.sleep(rest)

    def _settle(self) -> None:
        """An attempt to connect ended (up, or failed): wake the requests waiting for it."""
        self._settles += 1
        done, self._settled = self._settled, asyncio.Event()
        done.set()

    async def reconnect_now(self, wait_s: float = RECONNECT_WAIT_S) -> None:
        """A request found this server down after its start-up window: make the next attempt
        to connect now instead of at the end of the back-off, and wait for it (or for the
        one under way) at most ``wait_s``. An upstream that came back then serves the
        request at once rather than failing it until the back-off ends; one still down
        fails it after one attempt (a refused connection: at once).

        Requests ask it of HTTP upstreams only: a remote server comes back on its own (a
        restart, a deploy), while a stdio server is a process this gateway starts, and
        one that keeps crashing is started again on the back-off's schedule, not once per
        request."""
        if self._task is None or self._closed or self.state == "up":
            return
        seen = self._settles
        self._wake.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                while self.state != "up" and self._settles == seen:
                    await self._settled.wait()

    async def _connected_session(self) -> None:
        mark(f"upstream {self.name!r} connecting")
        self.state = "connecting"
        self._broken.clear()
        client = self._client_factory()
        async with contextlib.AsyncExitStack() as stack:
            # start-up waits connect_timeout_s for this (Upstreams.start); the attempt itself
            # goes on, so a server slow to start (a cold npx, a JVM) still comes up
            before = leaders() if self.config.command else set()
            async with asyncio.timeout(CONNECT_ATTEMPT_S):
                await stack.enter_async_context(client)
                if self.config.command:  # the stdio server process(es) it started
                    SPAWNED.update(leaders() - before)
                self._client = client
                self.instructions = redact((client.instructions or "").strip())
                wires = await self._fetch()
                await self._fetch_extras()
            self.state = "up"
            self.connects += 1
            self.last_error = ""
            self._settle()
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

            log.info("%s: listen stream ended: %s", self.label, describe(exc))
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
        """The upstream's tools in wire form (every page); none from a server without tools
        (one that offers only prompts or resources)."""
        client = self._client
        if client.server_capabilities.tools is None:
            return []
        return await pages(client.list_tools, "tools")

    async def _fetch_extras(self) -> None:
        """Resources, templates and prompts (every page), when offered (failures are logged)."""
        from mcp import MCPError

        client = self._client
        caps = client.server_capabilities
        try:
            if caps.resources is not None:
                self.resources = await pages(client.list_resources, "resources")
                try:
                    self.templates = await pages(
                        client.list_resource_templates, "resource_templates"
                    )
                except MCPError:
                    self.templates = []
            if caps.prompts is not None:
                self.prompts = await pages(client.list_prompts, "prompts")
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
