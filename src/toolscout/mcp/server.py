"""The MCP gateway server: one MCP server in front of many, a thin layer over ``Toolscout``.

The client sees, per caller (:data:`~toolscout.mcp.config.MODES`):

* ``meta`` — two meta-tools: ``search_tools(query, k)`` returns compact cards and
  the full input schemas of the shortlist; ``call_tool(name, arguments)`` runs
  any tool by the name search gave (or its id);
* ``dynamic`` — the meta-tools, plus every tool a search found, added to this
  caller's own tool list (``notifications/tools/list_changed`` is sent); past
  ``dynamic_limit`` the least recently used are dropped;
* ``direct`` — every tool the caller is entitled to, directly;
* ``auto`` (default) — the tier rule: ``direct`` under 10 entitled tools, else ``meta``.

Who is calling: over streamable HTTP, each request's bearer token (verified by
the Toolscout verifier; the server publishes OAuth protected-resource metadata
so standard clients find the issuer); over stdio, the principal fixed in the
config. Every search goes through ``Toolscout.adiscover`` (entitle first) and
every call through ``Toolscout.aexecute`` (policy re-check, argument
validation, audit, the discovery link), so a caller can never run a tool it is
not entitled to, whatever name it guesses.

Upstream resources and prompts are passed through, named ``<server>/<name>``, to
callers the same policy function allows the server's own scopes and tenants.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from toolscout.discovery import inject
from toolscout.errors import ConfigError, ImportRefused, TokenError, ToolscoutError
from toolscout.mcp import passthrough
from toolscout.mcp.config import GatewayConfig
from toolscout.mcp.meta import CALL, SEARCH, meta_tools, text_result
from toolscout.mcp.upstream import POLL_S, Upstream, Upstreams
from toolscout.policy import DEFAULT_ADMIN_SCOPE, PolicyConfig, Principal

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp.types import CallToolResult, Tool

    from toolscout.service import Toolscout

__all__ = ["MCPGateway", "check_transport"]

log = logging.getLogger(__name__)

#: discovery ids remembered per caller (for the discovery link of later calls)
RECENT = 256
#: callers whose per-caller state (dynamic list, recent searches) is kept
MAX_CALLERS = 4096


class _Caller:
    """Per-caller state: the dynamic list (LRU) and recent discoveries."""

    __slots__ = ("dynamic", "recent")

    def __init__(self) -> None:
        self.dynamic: OrderedDict[str, None] = OrderedDict()
        #: rendered name or id → (tool id, discovery id)
        self.recent: OrderedDict[str, tuple[str, str | None]] = OrderedDict()


class MCPGateway:
    """Fronts the configured upstreams as one MCP server, over stdio or streamable HTTP."""

    def __init__(
        self,
        config: GatewayConfig,
        *,
        toolscout: Toolscout | None = None,
        errlog: TextIO | None = None,
        poll_s: float = POLL_S,
    ) -> None:
        from mcp.server.subscriptions import InMemorySubscriptionBus

        self.config = config
        self.upstreams = Upstreams(config, on_tools=self._on_tools, errlog=errlog, poll_s=poll_s)
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self.ts = toolscout if toolscout is not None else self._open_toolscout()
        self.bus = InMemorySubscriptionBus()
        self._callers: OrderedDict[str, _Caller] = OrderedDict()
        self._sessions: OrderedDict[int, Any] = OrderedDict()
        self._index_lock = asyncio.Lock()
        self.index_log: list[tuple[str, int, int, int]] = []  # (server, changed, removed, embedded)
        self.server = self._build_server()

    # -- assembly --------------------------------------------------------------
    def _open_toolscout(self) -> Toolscout:
        from toolscout.service import Toolscout
        from toolscout.settings import Settings

        cfg = self.config
        db = cfg.db
        if db == ":memory:":
            self._tmpdir = tempfile.TemporaryDirectory(prefix="toolscout-mcp-")
            db = os.path.join(self._tmpdir.name, "gateway.db")
        pem = (cfg.jwt_key or "").lstrip().startswith("-----BEGIN")
        settings = Settings(
            db=db,
            jwt_key=cfg.jwt_key,
            jwt_algorithms=("RS256", "ES256") if pem else ("HS256",),
            jwt_issuer=cfg.jwt_issuer,
            jwt_audience=cfg.jwt_audience,
            # the upstream's own time-out answers first, naming the server
            timeout_s=cfg.timeout_s + 5.0,
        )
        policy = None
        if cfg.admin_scope or cfg.roles:
            policy = PolicyConfig(
                roles=dict(cfg.roles), admin_scope=cfg.admin_scope or DEFAULT_ADMIN_SCOPE
            )
        limits = None
        if cfg.rate_per_second is not None or cfg.burst is not None:
            from toolscout.gateway.limits import Limits

            base = Limits()
            limits = Limits(
                rate_per_second=(
                    cfg.rate_per_second if cfg.rate_per_second is not None else base.rate_per_second
                ),
                burst=cfg.burst if cfg.burst is not None else base.burst,
            )
        return Toolscout.open(
            settings, executors={"*": self.upstreams}, policy=policy, limits=limits
        )

    def _build_server(self) -> Server[Any]:
        from mcp.server.lowlevel import NotificationOptions, Server
        from mcp.server.subscriptions import ListenHandler

        class GatewayServer(Server[Any]):
            """Announces ``listChanged`` for tools to handshake-era clients too (HTTP)."""

            def create_initialization_options(
                self,
                notification_options: NotificationOptions | None = None,
                experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                extensions: dict[str, dict[str, Any]] | None = None,
            ) -> Any:
                return super().create_initialization_options(
                    notification_options or NotificationOptions(tools_changed=True),
                    experimental_capabilities,
                    extensions,
                )

        return GatewayServer(
            "toolscout",
            version="0.1.0",
            title="toolscout MCP gateway",
            instructions=(
                "Many tools are behind this server. Use search_tools to find the ones for the "
                "task (it returns their names and input schemas), then call_tool to run one."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_subscriptions_listen=ListenHandler(self.bus),
        )

    # -- lifecycle -------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def running(self, *, wait_s: float | None = None) -> AsyncIterator[MCPGateway]:
        """Upstreams connected (each waited for at most ``connect_timeout_s``), then closed.

        Tools a persistent catalog still holds from servers no longer configured are
        removed first (upstream tools are the cards whose source is ``mcp:<server>``)."""
        configured = {f"mcp:{s.name}" for s in self.config.servers}
        stale = [
            spec.id
            for spec in self.ts.catalog.specs()
            if spec.card.source.startswith("mcp:") and spec.card.source not in configured
        ]
        if stale:
            await asyncio.to_thread(self.ts.catalog.remove, stale)
        await self.upstreams.start(wait_s=wait_s)
        try:
            yield self
        finally:
            await self.upstreams.aclose()

    def close(self) -> None:
        self.ts.close()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def check(self, transport: str) -> None:
        check_transport(self.config, transport)

    async def serve_stdio(self) -> None:
        """Serve one client over this process's stdin/stdout."""
        from mcp.server.stdio import stdio_server

        self.check("stdio")
        async with self.running(), stdio_server() as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())

    def http_app(self, *, host: str = "127.0.0.1", port: int = 8701) -> Any:
        """The Starlette app: ``/mcp`` behind bearer auth, plus protected-resource metadata."""
        from mcp.server.auth.settings import AuthSettings

        self.check("http")
        cfg = self.config
        resource = cfg.resource_url or f"http://{host}:{port}/mcp"
        issuer = (cfg.authorization_servers or (cfg.jwt_issuer or resource,))[0]
        auth = AuthSettings.model_validate(
            {
                "issuer_url": issuer,
                "resource_server_url": resource,
                "validate_token_resource": False,  # the JWT verifier checks the audience
            }
        )
        return self.server.streamable_http_app(
            host=host, auth=auth, token_verifier=_BearerVerifier(self.ts)
        )

    async def serve_http(self, *, host: str = "127.0.0.1", port: int = 8701) -> None:
        import uvicorn

        app = self.http_app(host=host, port=port)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        async with self.running():
            await uvicorn.Server(config).serve()

    # -- who is calling ----------------------------------------------------------
    def _principal(self, ctx: Any) -> Principal:
        request = getattr(ctx, "request", None)
        if request is not None and hasattr(request, "headers"):
            header = request.headers.get("authorization", "")
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise TokenError("a bearer token is required", reason="missing_token")
            return self.ts.verify(token.strip())
        if self.config.principal is None:
            raise TokenError("no caller is configured for this transport", reason="missing_token")
        return self.config.principal

    def _state(self, principal: Principal) -> _Caller:
        key = f"{principal.tenant}\x00{principal.subject}"
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
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        conn = getattr(ctx.session, "_connection", ctx.session)
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

    # -- tools/list ----------------------------------------------------------------
    async def _list_tools(self, ctx: Any, params: Any) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp.types import INVALID_REQUEST, ListToolsResult

        try:
            principal = self._principal(ctx)
        except TokenError as exc:
            raise MCPError(INVALID_REQUEST, f"refused: {exc}") from None
        self._remember_session(ctx)
        mode = self.mode(principal)
        tools: list[Tool] = [] if mode == "direct" else meta_tools()
        if mode == "direct":
            ids = [c.id for c in self.ts.entitled(principal)]
        elif mode == "dynamic":
            allowed = {c.id for c in self.ts.entitled(principal)}
            ids = [i for i in self._state(principal).dynamic if i in allowed]
        else:
            ids = []
        tools += self.render(ids)
        return ListToolsResult(tools=tools)

    def render(self, ids: Sequence[str]) -> list[Tool]:
        """MCP tools for catalog ids: the rendered name, the upstream's annotations and title."""
        from mcp.types import Tool

        specs = [s for s in (self.ts.catalog.spec(i) for i in ids) if s is not None]
        if not specs:
            return []
        upstream = self.upstreams.tools()
        out = []
        for spec, rendered in zip(specs, inject.render(specs, "mcp"), strict=True):
            wire = upstream.get(spec.id)
            if wire is not None:
                for key in ("annotations", "title"):
                    if key in wire.wire:
                        rendered[key] = wire.wire[key]
            out.append(Tool.model_validate(rendered))
        return out

    # -- tools/call -------------------------------------------------------------------
    async def _call_tool(self, ctx: Any, params: Any) -> CallToolResult:
        try:
            principal = self._principal(ctx)
        except TokenError as exc:
            return text_result(f"refused ({exc.reason}): {exc}", error=True)
        self._remember_session(ctx)
        name, args = params.name, dict(params.arguments or {})
        try:
            if name == SEARCH:
                return await self._search(ctx, principal, args)
            if name == CALL:
                inner = args.get("name")
                inner_args = args.get("arguments", {})
                if not isinstance(inner, str) or not inner.strip():
                    return text_result("call_tool needs 'name': a tool name", error=True)
                if not isinstance(inner_args, Mapping):
                    return text_result("call_tool: 'arguments' must be an object", error=True)
                return await self._execute(principal, inner.strip(), dict(inner_args))
            return await self._execute(principal, name, args)
        except ToolscoutError as exc:
            return text_result(f"{type(exc).__name__}: {exc}", error=True)

    async def _search(
        self, ctx: Any, principal: Principal, args: Mapping[str, Any]
    ) -> CallToolResult:
        query, k = args.get("query"), args.get("k", self.config.k)
        unknown = sorted(set(args) - {"query", "k"})
        if unknown:
            return text_result(f"search_tools: unknown argument {unknown[0]!r}", error=True)
        if not isinstance(query, str) or not query.strip():
            return text_result("search_tools needs 'query': what you want to do", error=True)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 10:
            return text_result("search_tools: 'k' must be an integer from 1 to 10", error=True)
        shortlist = await self.ts.adiscover(
            principal, query, k=k, fmt="mcp", tier=inject.Tier.PROGRESSIVE
        )
        state = self._state(principal)
        upstream = self.upstreams.tools()
        found = []
        for scored, schema in zip(shortlist.tools, shortlist.schemas, strict=True):
            spec = self.ts.catalog.spec(scored.id)
            if spec is None:
                continue
            owner = upstream.get(scored.id)
            up = self.upstreams.owner(scored.id)
            entry: dict[str, Any] = {
                "name": schema["name"],
                "id": scored.id,
                "server": owner.server if owner is not None else "",
                "summary": spec.card.summary,
                "risk": spec.card.risk.value,
                "score": round(scored.score, 3),
                "inputSchema": schema["inputSchema"],
            }
            if up is not None and up.state != "up":
                entry["status"] = f"server {up.name!r} is {up.state}"
            found.append(entry)
            for key in (schema["name"], scored.id):
                state.recent[key] = (scored.id, shortlist.discovery_id)
                state.recent.move_to_end(key)
        while len(state.recent) > RECENT:
            state.recent.popitem(last=False)
        payload: dict[str, Any] = {"tools": found, "discovery_id": shortlist.discovery_id}
        if not found:
            payload["note"] = "no tool you may use matches; try other words"
        else:
            payload["next"] = "run one with call_tool(name, arguments)"
        if self.mode(principal) == "dynamic" and found:
            added = False
            # best match last, so it is the most recently used (the last to be dropped)
            for entry in reversed(found[: self.config.dynamic_limit]):
                added |= entry["id"] not in state.dynamic
                state.dynamic[entry["id"]] = None
                state.dynamic.move_to_end(entry["id"])
            while len(state.dynamic) > self.config.dynamic_limit:
                state.dynamic.popitem(last=False)
                added = True
            if added:
                await self._notify_tools_changed(ctx)
        return text_result(payload)

    async def _execute(
        self, principal: Principal, name: str, args: dict[str, Any]
    ) -> CallToolResult:
        from mcp.types import CallToolResult

        state = self._state(principal)
        _, did = state.recent.get(name, (None, None))
        result = await self.ts.aexecute(principal, name, args, discovery_id=did)
        if result.tool_id is not None and result.tool_id in state.dynamic:
            state.dynamic.move_to_end(result.tool_id)
        if result.ok and isinstance(result.value, Mapping):
            wire = {k: v for k, v in result.value.items() if k not in ("_meta", "resultType")}
            return CallToolResult.model_validate(wire)
        if result.ok:
            return text_result(result.value)
        return text_result(f"{result.status} ({result.reason}): {result.message}", error=True)

    # -- resources and prompts: passed through, namespaced, under the server's scopes ----
    def _caller(self, ctx: Any) -> Principal:
        from mcp.shared.exceptions import MCPError
        from mcp.types import INVALID_REQUEST

        try:
            return self._principal(ctx)
        except TokenError as exc:
            raise MCPError(INVALID_REQUEST, f"refused: {exc}") from None

    def servers_for(self, principal: Principal) -> list[Upstream]:
        """The upstreams whose resources and prompts ``principal`` may use."""
        return passthrough.servers_for(self.upstreams, self.ts.catalog.policy, principal)

    async def _list_resources(self, ctx: Any, params: Any) -> Any:
        return passthrough.list_resources(self.servers_for(self._caller(ctx)))

    async def _read_resource(self, ctx: Any, params: Any) -> Any:
        return await passthrough.read_resource(self.servers_for(self._caller(ctx)), str(params.uri))

    async def _list_prompts(self, ctx: Any, params: Any) -> Any:
        return passthrough.list_prompts(self.servers_for(self._caller(ctx)))

    async def _get_prompt(self, ctx: Any, params: Any) -> Any:
        servers = self.servers_for(self._caller(ctx))
        return await passthrough.get_prompt(servers, str(params.name), params.arguments)

    # -- catalog upkeep ---------------------------------------------------------------
    async def _on_tools(self, up: Upstream) -> None:
        """An upstream's tool list arrived or changed: index what changed, drop what went."""
        async with self._index_lock:
            prefix = up.config.prefix
            catalog = self.ts.catalog
            current = {s.id: s for s in catalog.specs() if s.id.startswith(prefix)}
            new = {tid: t.spec for tid, t in up.tools.items()}
            changed = [
                s
                for tid, s in new.items()
                if tid not in current or current[tid].content_hash() != s.content_hash()
            ]
            gone = [tid for tid in current if tid not in new]
            embedded = 0
            if changed:  # embedding is CPU work: off the event loop, like discovery
                try:
                    report = await asyncio.to_thread(catalog.add, changed)
                except ImportRefused as exc:
                    # an upstream may not widen its own tools (e.g. drop a destructive hint):
                    # the stored, stricter card stays; the rest of the change is indexed
                    log.warning("%s: %s", up.name, exc)
                    refused = {tid for tid, _ in exc.conflicts}
                    changed = [s for s in changed if s.id not in refused]
                    report = await asyncio.to_thread(catalog.add, changed)
                embedded = report.stats.embedded
            if gone:
                await asyncio.to_thread(catalog.remove, gone)
                for state in self._callers.values():
                    for tid in gone:
                        state.dynamic.pop(tid, None)
            self.index_log.append((up.name, len(changed), len(gone), embedded))
            for warning in up.warnings:
                log.warning("%s", warning)
        if changed or gone:
            await self._notify_tools_changed(None)

    async def _notify_tools_changed(self, ctx: Any) -> None:
        """Tell clients their tool list changed: listen streams and handshake sessions."""
        from mcp.server.subscriptions import ToolsListChanged

        await self.bus.publish(ToolsListChanged())
        for key, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
            except Exception:  # a gone client: forget it
                self._sessions.pop(key, None)


def check_transport(config: GatewayConfig, transport: str) -> None:
    """Raise :class:`ConfigError` unless ``config`` can serve ``transport``."""
    if transport == "stdio" and config.principal is None:
        raise ConfigError(
            "the stdio transport needs a fixed caller: set toolscout.principal "
            '({"subject": ..., "scopes": [...]}) in the config'
        )
    if transport == "http" and config.jwt_key is None:
        raise ConfigError(
            "the http transport verifies each caller's bearer token: set toolscout.jwt_key "
            "(an HS256 secret) or toolscout.jwt_key_file (a PEM public key) in the config"
        )


class _BearerVerifier:
    """The SDK's ``TokenVerifier`` over the Toolscout verifier (for the HTTP auth middleware)."""

    def __init__(self, ts: Toolscout) -> None:
        self.ts = ts

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        try:
            principal = self.ts.verify(token)
        except TokenError:
            return None
        return AccessToken(
            token=token,
            client_id=principal.subject,
            scopes=sorted(principal.scopes),
            subject=principal.subject,
        )
