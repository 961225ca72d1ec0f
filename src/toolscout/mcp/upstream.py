"""All the upstream MCP servers: the gateway's executor, and whose session a request uses.

:class:`Upstreams` holds one shared :class:`~toolscout.mcp.connection.Upstream`
session per configured server (it indexes the tools and follows their changes)
and, over streamable HTTP, each caller's own sessions (:meth:`Upstreams.route`):
a caller (tenant and subject) gets its own session with each server it uses,
opened on its first request and declaring upstream the client capabilities its
client declared, so state one caller leaves upstream is never another's. It is
the gateway's executor (bound as ``"*"``): a call goes to its server over the
caller's session.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from toolscout.cards import ToolSpec
from toolscout.errors import ExecutorError
from toolscout.mcp.cards import UpstreamTool
from toolscout.mcp.config import GatewayConfig
from toolscout.mcp.connection import UPSTREAM_UNAVAILABLE, Upstream
from toolscout.mcp.processes import kill_children, resolve_command
from toolscout.mcp.relay import CAPABILITIES, LINK, Link
from toolscout.mcp.supervisor import POLL_S

__all__ = ["Upstream", "UpstreamTool", "Upstreams", "kill_children", "resolve_command"]

log = logging.getLogger(__name__)

#: callers' own upstream sessions kept (the least recently used is closed past this)
MAX_PRIVATE = 256
#: a caller's own session re-lists rarely: its tools are indexed from the shared one
PRIVATE_POLL_S = 300.0


@dataclass
class Upstreams:
    """Every configured upstream, and the executor that routes calls to them."""

    config: GatewayConfig
    on_tools: Callable[[Upstream], Awaitable[None]] | None = None
    errlog: TextIO | None = None
    poll_s: float = POLL_S
    on_notify: Callable[[Upstream, Any], Awaitable[None]] | None = None
    servers: dict[str, Upstream] = field(default_factory=dict)
    #: (server prefix, caller key, client capabilities) → that caller's own session
    private: OrderedDict[tuple[str, str, frozenset[str]], Upstream] = field(
        default_factory=OrderedDict
    )

    def __post_init__(self) -> None:
        for sc in self.config.servers:
            self.servers[sc.prefix] = Upstream(
                sc,
                timeout_s=sc.policy.timeout_s or self.config.timeout_s,
                connect_timeout_s=self.config.connect_timeout_s,
                max_result_bytes=sc.policy.max_result_bytes or self.config.max_result_bytes,
                max_argument_bytes=sc.policy.max_argument_bytes or self.config.max_argument_bytes,
                on_tools=self.on_tools,
                errlog=self.errlog,
                poll_s=self.poll_s,
                on_notify=self.on_notify,
            )

    async def start(
        self, *, wait_s: float | None = None, skip: frozenset[str] = frozenset()
    ) -> None:
        """Start the supervisors (of every server but those whose prefix is in ``skip``);
        wait (bounded) for their first tool lists."""
        started = [up for up in self.servers.values() if up.config.prefix not in skip]
        for up in started:
            up.start()
        limit = self.config.connect_timeout_s if wait_s is None else wait_s
        listed = await asyncio.gather(*(up.wait_listed(limit) for up in started))
        for up, ok in zip(started, listed, strict=True):
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

    async def route(self, up: Upstream, link: Link | None = None) -> Upstream:
        """The session of ``up`` a request goes over (``link``: the request's caller, by
        default the one in :data:`~toolscout.mcp.relay.LINK`).

        An HTTP caller (its link names a ``caller`` key) gets its own session, declaring
        upstream the capabilities its client declared. The one client of stdio uses the
        shared session when its client declares every relayable capability (as the shared
        session does), else a session of its own that declares just what it has. The
        session remembers the caller it serves, for requests outside any call."""
        link = link if link is not None else LINK.get()
        up.wanted()  # a server whose start was put off (the stored catalog answered): now
        key = self._key(up, link)
        if key is None:
            if link is not None and link.solo:
                up.relay.owner = link.detached()
            return up
        assert link is not None
        caps = key[2]
        own = self.private.get(key)
        if own is None:
            own = self.private[key] = Upstream(
                up.config,
                timeout_s=up.timeout_s,
                connect_timeout_s=up.connect_timeout_s,
                max_result_bytes=up.max_result_bytes,
                max_argument_bytes=up.max_argument_bytes,
                errlog=self.errlog,
                poll_s=PRIVATE_POLL_S,
                on_notify=self.on_notify,
                capabilities=caps,
            )
            own.relay.owner = link.detached()
            own.start()
            while len(self.private) > MAX_PRIVATE:
                _, old = self.private.popitem(last=False)
                asyncio.get_running_loop().create_task(old.aclose())
            # what it asks while it starts (roots, as a session opens) rides on this request
            own.relay.active.append(link)
            try:
                await own.wait_listed(self.config.connect_timeout_s)
            finally:
                own.relay.active.remove(link)
            return own
        own.relay.owner = link.detached()
        self.private.move_to_end(key)
        await own.wait_listed(self.config.connect_timeout_s)
        return own

    def _key(self, up: Upstream, link: Link | None) -> tuple[str, str, frozenset[str]] | None:
        """The key of the caller's own session with ``up``; ``None``: the shared one."""
        if link is None:
            return None
        caps = link.capabilities
        if link.caller is not None:
            return (up.config.prefix, link.caller, caps)
        if link.solo and self.config.upstream_sessions != "shared" and caps != CAPABILITIES:
            return (up.config.prefix, "", caps)
        return None

    def existing(self, up: Upstream, link: Link) -> Upstream | None:
        """The session of ``up`` the caller of ``link`` uses, if it is open (none is opened)."""
        key = self._key(up, link)
        return up if key is None else self.private.get(key)

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
