"""Who is calling the gateway, and the state kept per caller: the base of its handlers.

:class:`GatewayBase` holds what every handler of :class:`~toolscout.mcp.server.MCPGateway`
shares: the caller of a request (over streamable HTTP, its bearer token, verified;
over stdio, the principal fixed in the config), the per-caller state (the dynamic
tool list, recent discoveries), the listing mode a caller gets, the client sessions
told about tool-list changes, and the upstream sessions a caller's request goes over.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, TextIO

from toolscout.discovery import inject
from toolscout.errors import TokenError
from toolscout.mcp import passthrough
from toolscout.mcp.config import GatewayConfig
from toolscout.mcp.relay import LINK, Link
from toolscout.mcp.rounds import Rounds
from toolscout.mcp.sdk import sdk_names
from toolscout.mcp.upstream import Upstream, Upstreams
from toolscout.policy import Principal

if TYPE_CHECKING:
    from toolscout.gateway.limits import RateLimiter
    from toolscout.service import Toolscout

__all__ = ["GatewayBase", "caller_key", "connection_of"]

#: callers whose per-caller state (dynamic list, recent searches) is kept
MAX_CALLERS = 4096
#: discovery ids remembered per caller (for the discovery link of later calls)
RECENT = 256


class _Caller:
    """Per-caller state: the dynamic list (LRU) and recent discoveries."""

    __slots__ = ("dynamic", "recent")

    def __init__(self) -> None:
        self.dynamic: OrderedDict[str, None] = OrderedDict()
        #: rendered name or id → (tool id, discovery id)
        self.recent: OrderedDict[str, tuple[str, str | None]] = OrderedDict()


class GatewayBase:
    """What the gateway's handlers share (the state is set by ``MCPGateway.__init__``)."""

    config: GatewayConfig
    errlog: TextIO | None
    upstreams: Upstreams
    ts: Toolscout
    bus: Any
    #: resources and prompts draw from a bucket of their own, of the tool calls' size
    _rate: RateLimiter
    _callers: OrderedDict[str, _Caller]
    #: handshake-era client sessions (told when the tool list changes)
    _sessions: OrderedDict[int, Any]
    #: resource URI → the sessions subscribed to it (their updates are passed on)
    _subscribers: dict[str, dict[int, Any]]
    _index_lock: asyncio.Lock
    #: prefixes of the servers the stored catalog already has tools of
    _stored: frozenset[str]
    _listed_once: asyncio.Event
    #: the warm-up ended (models loaded, the caller's state derived), either way
    _warmed: asyncio.Event
    #: one warm-up at a time (and whether another was asked for meanwhile)
    _warming: asyncio.Lock
    _warm_again: bool
    _rewarm_task: asyncio.Task[None] | None
    _names: dict[str, str]
    _by_name: dict[str, str]
    #: the catalog generation the names were made of
    _names_key: int | None
    index_log: list[tuple[str, int, int, int]]
    #: 2026-07-28 callers' calls waiting for answers (input-required rounds)
    _rounds: Rounds

    def _init_state(self) -> None:
        self._subscribers = {}
        self._callers = OrderedDict()
        self._sessions = OrderedDict()
        self._index_lock = asyncio.Lock()
        self._stored = frozenset()
        self._listed_once = asyncio.Event()
        self._warmed = asyncio.Event()
        self._warming = asyncio.Lock()
        self._warm_again = False
        self._rewarm_task = None
        self._names, self._by_name, self._names_key = {}, {}, None
        self.index_log = []  # (server, changed, removed, embedded)
        self._rounds = Rounds()

    def _say(self, line: str) -> None:
        """One progress line on stderr (the errlog), when the gateway has one."""
        if self.errlog is not None:
            with contextlib.suppress(Exception):
                print(f"toolscout: {line}", file=self.errlog, flush=True)

    async def ready(self) -> None:
        """Before answering a list: wait (bounded by ``connect_timeout_s``) for servers that
        are starting and have nothing in the stored catalog yet."""
        await self.upstreams.ready(skip=self._stored)

    def indexing(self) -> list[str]:
        """The servers whose first listing has not arrived yet."""
        return [up.name for up in self.upstreams.servers.values() if not up.listed.is_set()]

    # -- who is calling ----------------------------------------------------------
    def _principal(self, ctx: Any) -> Principal:
        request = getattr(ctx, "request", None)
        if request is not None and hasattr(request, "headers"):
            header = request.headers.get("authorization", "")
            if not header and self.config.dev and self.config.principal is not None:
                return self.config.principal  # development mode: the local caller
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise TokenError("a bearer token is required", reason="missing_token")
            return self.ts.verify(token.strip())
        if self.config.principal is None:
            raise TokenError("no caller is configured for this transport", reason="missing_token")
        return self.config.principal

    def _state(self, principal: Principal) -> _Caller:
        key = caller_key(principal)
        state = self._callers.get(key)
        if state is None:
            state = self._callers[key] = _Caller()
            while len(self._callers) > MAX_CALLERS:
                self._callers.popitem(last=False)
        else:
            self._callers.move_to_end(key)
        return state

    def _remember_session(self, ctx: Any) -> None:
        """Keep handshake-era sessions, to tell them when the tool list changes."""
        if ctx.protocol_version in sdk_names().MODERN:
            return
        conn = connection_of(ctx)
        self._sessions[id(conn)] = ctx.session
        self._sessions.move_to_end(id(conn))
        while len(self._sessions) > MAX_CALLERS:
            self._sessions.popitem(last=False)

    def mode(self, principal: Principal) -> str:
        mode = self.config.mode
        if mode == "auto":
            n = len(self.ts.entitled(principal))
            return "direct" if 0 < n < inject.ALL_BELOW else "meta"
        return mode

    def _caller(self, ctx: Any) -> Principal:
        from mcp.shared.exceptions import MCPError
        from mcp.types import INVALID_REQUEST

        try:
            return self._principal(ctx)
        except TokenError as exc:
            raise MCPError(INVALID_REQUEST, f"refused: {exc}") from None

    def _session_key(self, ctx: Any, principal: Principal) -> str | None:
        """Over HTTP each caller (tenant and subject) gets its own upstream sessions, unless
        the config shares them; over stdio there is one caller."""
        request = getattr(ctx, "request", None)
        if self.config.upstream_sessions == "shared" or request is None:
            return None
        return caller_key(principal)

    def _link(self, ctx: Any, principal: Principal) -> Link:
        """The link of a request: where its progress, logs and the upstream's questions go."""
        return Link(ctx, caller=self._session_key(ctx, principal))

    async def _servers(self, ctx: Any, principal: Principal) -> list[Upstream]:
        """The upstreams ``principal`` may use, as sessions of this caller."""
        link = LINK.get() or self._link(ctx, principal)
        return [await self.upstreams.route(up, link) for up in self.servers_for(principal)]

    def visible(self, principal: Principal) -> list[Upstream]:
        """The upstreams ``principal`` can see something of: a tool it is entitled to, or
        (its server-wide scopes and tenants) its resources and prompts."""
        wide = {up.config.prefix for up in self.servers_for(principal)}
        tools = {card.id.split("/", 1)[0] + "/" for card in self.ts.entitled(principal)}
        return [up for up in self.upstreams.servers.values() if up.config.prefix in wide | tools]

    def servers_for(self, principal: Principal) -> list[Upstream]:
        """The upstreams whose resources and prompts ``principal`` may use."""
        return passthrough.servers_for(self.upstreams, self.ts.catalog.policy, principal)

    async def _on_upstream_notice(self, up: Upstream, message: Any) -> None:
        """An upstream's notice for the gateway's clients (each handler class takes its own)."""

    async def _notify_tools_changed(self, ctx: Any) -> None:
        """Tell clients their tool list changed: listen streams and handshake sessions."""
        from mcp.server.subscriptions import ToolsListChanged

        await self.bus.publish(ToolsListChanged())
        for key, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
            except Exception:  # a gone client: forget it
                self._sessions.pop(key, None)


def caller_key(principal: Principal) -> str:
    """One caller (tenant and subject) as a key: its state, its upstream sessions, its
    tasks and its input-required rounds are kept under it."""
    return f"{principal.tenant}\x00{principal.subject}"


def connection_of(ctx: Any) -> Any:
    """The client connection behind a request (one per client session)."""
    return getattr(ctx.session, "_connection", ctx.session)
