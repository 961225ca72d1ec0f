"""The MCP gateway server: one MCP server in front of many, a thin layer over ``Toolscout``.

The client sees, per caller (:data:`~toolscout.mcp.config.MODES`):

* ``meta`` — two meta-tools: ``search_tools(query, k)`` returns compact cards and
  the full input schemas of the shortlist; ``call_tool(name, arguments)`` runs
  any tool by the name search gave (or its id);
* ``dynamic`` — the meta-tools, plus every tool a search found, added to this
  caller's own tool list (``notifications/tools/list_changed`` is sent); past
  ``dynamic_limit`` the least recently used are dropped; a caller entitled to no
  more than ``dynamic_limit`` tools has them all listed from the start;
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
import re
import tempfile
import time
import warnings
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from toolscout.discovery import inject
from toolscout.errors import ConfigError, GatewayError, ImportRefused, TokenError, ToolscoutError
from toolscout.mcp import passthrough
from toolscout.mcp.config import GatewayConfig
from toolscout.mcp.meta import CALL, SEARCH, meta_tools, text_result
from toolscout.mcp.relay import LINK, Link
from toolscout.mcp.upstream import POLL_S, Upstream, Upstreams, kill_children
from toolscout.policy import DEFAULT_ADMIN_SCOPE, PolicyConfig, Principal
from toolscout.redact import redact

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp.types import CallToolResult, Tool

    from toolscout.service import Toolscout

__all__ = ["MCPGateway", "check_transport"]

log = logging.getLogger(__name__)

#: discovery ids remembered per caller (for the discovery link of later calls)
RECENT = 256
#: what a listed tool keeps from its server's own definition (name and schema are ours)
PASSED_FIELDS = (
    "description",
    "title",
    "annotations",
    "outputSchema",
    "execution",
    "icons",
    "_meta",
)
#: seconds after start-up the embedder is loaded if no client has listed tools by then
WARM_AFTER_S = 2.0
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
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
        self.errlog = errlog
        self.upstreams = Upstreams(
            config,
            on_tools=self._on_tools,
            errlog=errlog,
            poll_s=poll_s,
            on_notify=self._on_upstream_notice,
        )
        #: resource URI → the sessions subscribed to it (their updates are passed on)
        self._subscribers: dict[str, dict[int, Any]] = {}
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self.ts = toolscout if toolscout is not None else self._open_toolscout()
        from toolscout.gateway.limits import RateLimiter

        #: resources and prompts draw from a bucket of their own, of the tool calls' size
        self._rate = RateLimiter.from_limits(self.ts.gateway.limits)
        self.bus = InMemorySubscriptionBus()
        self._callers: OrderedDict[str, _Caller] = OrderedDict()
        self._sessions: OrderedDict[int, Any] = OrderedDict()
        self._index_lock = asyncio.Lock()
        self._stored: frozenset[str] = frozenset()
        self._listed_once = asyncio.Event()
        self._names: dict[str, str] = {}
        self._by_name: dict[str, str] = {}
        self._names_key: frozenset[str] | None = None
        self.index_log: list[tuple[str, int, int, int]] = []  # (server, changed, removed, embedded)
        self.server = self._build_server()

    # -- assembly --------------------------------------------------------------
    def _open_toolscout(self) -> Toolscout:
        from toolscout.service import Toolscout
        from toolscout.settings import Settings

        cfg = self.config
        db = cfg.catalog_path()
        if db == ":memory:":  # the catalog only: the audit log is never temporary
            self._tmpdir = tempfile.TemporaryDirectory(prefix="toolscout-mcp-")
            db = os.path.join(self._tmpdir.name, "gateway.db")
        else:
            Path(db).parent.mkdir(parents=True, exist_ok=True)
        pem = (cfg.jwt_key or "").lstrip().startswith("-----BEGIN")
        settings = Settings(
            db=db,
            jwt_key=cfg.jwt_key,
            jwt_algorithms=("RS256", "ES256") if pem else ("HS256",),
            jwt_issuer=cfg.jwt_issuer,
            jwt_audience=cfg.jwt_audience,
            audit_path=cfg.audit_path(),
            audit_key=cfg.audit_key,
            # each upstream keeps its own deadline (moved by progress, per server and tool)
            timeout_s=86400.0,
            prefetch_models=False,  # loaded by _warm, once initialize is answered
        )
        policy = None
        if cfg.admin_scope or cfg.roles:
            policy = PolicyConfig(
                roles=dict(cfg.roles), admin_scope=cfg.admin_scope or DEFAULT_ADMIN_SCOPE
            )
        from toolscout.gateway.limits import Limits

        base = Limits()
        limits = Limits(
            rate_per_second=(
                cfg.rate_per_second if cfg.rate_per_second is not None else base.rate_per_second
            ),
            burst=cfg.burst if cfg.burst is not None else base.burst,
            max_argument_bytes=cfg.max_argument_bytes,
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

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # logging/setLevel: deprecated in 2026-07-28, not gone
            return GatewayServer(  # type: ignore[call-overload,no-any-return]
                "toolscout",
                version="0.1.0",
                title="toolscout MCP gateway",
                instructions=self.instructions(),
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_list_resources=self._list_resources,
                on_list_resource_templates=self._list_templates,
                on_read_resource=self._read_resource,
                on_subscribe_resource=self._subscribe,
                on_unsubscribe_resource=self._unsubscribe,
                on_list_prompts=self._list_prompts,
                on_get_prompt=self._get_prompt,
                on_completion=self._complete,
                on_set_logging_level=self._set_level,
                on_subscriptions_listen=ListenHandler(self.bus),
            )

    def instructions(self) -> str:
        """The gateway's instructions for the mode it serves, then each upstream's own."""
        mode = self.config.mode
        if mode == "direct":
            own = "The tools of several MCP servers are listed here, as each caller may use them."
        elif mode == "dynamic":
            own = (
                "Many tools are behind this server. Use search_tools to find the ones for the "
                "task: the tools found are added to your tool list, to call directly."
            )
        else:
            own = (
                "Many tools are behind this server. Use search_tools to find the ones for the "
                "task (it returns their names and input schemas), then call_tool to run one."
            )
            if mode == "auto":
                own += " With few tools, they are listed directly instead."
        parts = [own]
        for up in self.upstreams.servers.values():
            text = up.instructions
            if text:
                parts.append(f"[{up.name}] {text}")
        return "\n\n".join(parts)

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
        self._stored = frozenset(
            spec.id.split("/", 1)[0] + "/"
            for spec in self.ts.catalog.specs()
            if spec.card.source in configured
        )
        self._say(
            f"serving {len(self.ts.catalog)} stored tools; connecting "
            f"{len(self.config.servers)} servers and indexing in the background"
            if self._stored
            else f"first start: indexing {len(self.config.servers)} servers in the background "
            "(search_tools says so until they are up)"
        )
        starting: asyncio.Task[None] | None = None
        # load the embedder and derive the catalog state off the loop, so the first search
        # does not pay for it; after the client's first tools/list (or WARM_AFTER_S), so the
        # import does not hold the interpreter while initialize is being answered
        warming = asyncio.get_running_loop().create_task(self._warm_later())
        if wait_s is not None:
            await self.upstreams.start(wait_s=wait_s)
        else:  # answer at once from the stored catalog; upstreams come up in the background
            starting = asyncio.get_running_loop().create_task(self.upstreams.start())
        try:
            yield self
        finally:
            if starting is not None and not starting.done():
                starting.cancel()
            await self.upstreams.aclose()
            with contextlib.suppress(Exception):
                await warming

    def _say(self, line: str) -> None:
        """One progress line on stderr (the errlog), when the gateway has one."""
        if self.errlog is not None:
            with contextlib.suppress(Exception):
                print(f"toolscout: {line}", file=self.errlog, flush=True)

    async def _warm_later(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(WARM_AFTER_S):
                await self._listed_once.wait()
        await asyncio.to_thread(self._warm)

    def _warm(self) -> None:
        """The embedder and the token counter loaded side by side, then the caller's
        discovery state derived by one unrecorded discovery (best effort)."""
        from toolscout.discovery.catalog import prefetch_models

        try:
            for thread in prefetch_models(self.ts.catalog.embedder):
                thread.join()
            if self.config.principal is not None:
                self.ts.catalog.discover(
                    "find the right tool", self.config.principal, k=1, fmt="mcp", record=False
                )
        except Exception as exc:  # a warm-up fault shows again, clearly, on first use
            log.info("warm-up: %s", exc)

    async def ready(self) -> None:
        """Before answering a list: wait (bounded by ``connect_timeout_s``) for servers that
        are starting and have nothing in the stored catalog yet."""
        await self.upstreams.ready(skip=self._stored)

    def indexing(self) -> list[str]:
        """The servers whose first listing has not arrived yet."""
        return [up.name for up in self.upstreams.servers.values() if not up.listed.is_set()]

    def close(self) -> None:
        kill_children()  # no stdio upstream outlives the gateway
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
        await self.ready()
        mode = self.mode(principal)
        tools: list[Tool] = [] if mode == "direct" else meta_tools()
        if mode == "direct":
            ids = [c.id for c in self.ts.entitled(principal)]
        elif mode == "dynamic":
            entitled = [c.id for c in self.ts.entitled(principal)]
            if len(entitled) <= self.config.dynamic_limit:  # it all fits in the dynamic list
                ids = entitled
            else:
                allowed = set(entitled)
                ids = [i for i in self._state(principal).dynamic if i in allowed]
        else:
            ids = []
        tools += self.render(ids)
        self._listed_once.set()
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
            if wire is not None:  # a listed tool keeps what its server says of it
                for key in PASSED_FIELDS:
                    if key in wire.wire:
                        rendered[key] = wire.wire[key]
            rendered["name"] = self.names().get(spec.id, rendered["name"])
            out.append(Tool.model_validate(rendered))
        return out

    def names(self) -> dict[str, str]:
        """Tool id → the name clients see: the upstream's own name when no other upstream
        tool has it (and it is no meta-tool's), else the catalog's ``server_tool`` name.
        Taken from the catalog, so names are the same before and after a server connects."""
        specs = [s for s in self.ts.catalog.specs() if s.card.source.startswith("mcp:")]
        key = frozenset(s.id for s in specs)
        if self._names_key != key:
            count: dict[str, int] = {}
            for spec in specs:
                count[spec.card.name] = count.get(spec.card.name, 0) + 1
            self._names = {
                spec.id: spec.card.name
                for spec in specs
                if count[spec.card.name] == 1
                and spec.card.name not in (SEARCH, CALL)
                and _NAME.match(spec.card.name)
            }
            self._by_name = {name: tid for tid, name in self._names.items()}
            self._names_key = key
        return self._names

    def resolve(self, name: str) -> str:
        """The catalog id of a name a client used (unknown names are left as they are)."""
        self.names()
        return self._by_name.get(name, name)

    # -- tools/call -------------------------------------------------------------------
    async def _call_tool(self, ctx: Any, params: Any) -> CallToolResult:
        try:
            principal = self._principal(ctx)
        except TokenError as exc:
            return text_result(f"refused ({exc.reason}): {exc}", error=True)
        self._remember_session(ctx)
        name, args = params.name, dict(params.arguments or {})
        if name not in (SEARCH, CALL):
            await self.ready()  # a first start: the first listings (bounded by connect_timeout_s)
        link = Link(ctx, caller=self._session_key(ctx, principal))
        token = LINK.set(link)
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
                return await self._execute(principal, inner.strip(), dict(inner_args), link)
            return await self._execute(principal, name, args, link)
        except ToolscoutError as exc:
            return text_result(f"{type(exc).__name__}: {exc}", error=True)
        finally:
            LINK.reset(token)

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
        await self.ready()  # a first start: the first listings (bounded by connect_timeout_s)
        shortlist = await self.ts.adiscover(
            principal, query, k=k, fmt="mcp", tier=inject.Tier.PROGRESSIVE
        )
        state = self._state(principal)
        upstream = self.upstreams.tools()
        found = []
        # a tool removed while the search ran has no schema: it is left out
        schemas = {shortlist.names.get(s["name"], ""): s for s in shortlist.schemas}
        for scored in shortlist.tools:
            spec, schema = self.ts.catalog.spec(scored.id), schemas.get(scored.id)
            if spec is None or schema is None:
                continue
            owner = upstream.get(scored.id)
            up = self.upstreams.owner(scored.id)
            entry: dict[str, Any] = {
                "name": self.names().get(scored.id, schema["name"]),
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
            for key in (schema["name"], entry["name"], scored.id):
                state.recent[key] = (scored.id, shortlist.discovery_id)
                state.recent.move_to_end(key)
        while len(state.recent) > RECENT:
            state.recent.popitem(last=False)
        payload: dict[str, Any] = {
            "tools": found,
            "discovery_id": shortlist.discovery_id,
            # the calibrated chance that the first tool is the right one, as HTTP and Python say
            "confidence": round(shortlist.confidence, 3),
            "low_confidence": shortlist.low_confidence,
        }
        abstained = getattr(shortlist, "abstained", None)
        if abstained:
            payload["abstained"] = abstained
        starting = self.indexing()
        if starting:
            payload["indexing"] = (
                f"still indexing {len(starting)} of {len(self.upstreams.servers)} servers "
                f"({', '.join(starting)}); their tools appear as they come up"
            )
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
        self, principal: Principal, name: str, args: dict[str, Any], link: Link | None = None
    ) -> CallToolResult:
        from mcp.types import CallToolResult

        state = self._state(principal)
        _, did = state.recent.get(name, (None, None))
        result = await self.ts.aexecute(principal, self.resolve(name), args, discovery_id=did)
        if result.tool_id is not None and result.tool_id in state.dynamic:
            state.dynamic.move_to_end(result.tool_id)
        if result.ok and isinstance(result.value, Mapping):
            wire = {k: v for k, v in result.value.items() if k not in ("_meta", "resultType")}
            return CallToolResult.model_validate(wire)
        if result.ok:
            return text_result(result.value)
        if link is not None and link.error is not None:
            # the upstream's own error content (secrets redacted), the reason code beside it
            wire = {k: v for k, v in link.error.items() if k not in ("_meta", "resultType")}
            wire["content"] = [
                *wire.get("content", []),
                {"type": "text", "text": f"[{result.status}: {result.reason}]"},
            ]
            wire["isError"] = True
            wire["_meta"] = {"toolscout/reason": result.reason}
            return CallToolResult.model_validate(wire)
        return text_result(f"{result.status} ({result.reason}): {result.message}", error=True)

    # -- resources and prompts: passed through, namespaced, under the server's scopes ----
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
        return f"{principal.tenant}\x00{principal.subject}"

    async def _servers(self, ctx: Any, principal: Principal) -> list[Upstream]:
        """The upstreams ``principal`` may use, as sessions of this caller."""
        caller = self._session_key(ctx, principal)
        return [await self.upstreams.route(up, caller) for up in self.servers_for(principal)]

    def servers_for(self, principal: Principal) -> list[Upstream]:
        """The upstreams whose resources and prompts ``principal`` may use."""
        return passthrough.servers_for(self.upstreams, self.ts.catalog.policy, principal)

    async def _list_resources(self, ctx: Any, params: Any) -> Any:
        await self.ready()
        return await passthrough.list_resources(await self._servers(ctx, self._caller(ctx)))

    async def _list_templates(self, ctx: Any, params: Any) -> Any:
        await self.ready()
        return await passthrough.list_templates(await self._servers(ctx, self._caller(ctx)))

    async def _read_resource(self, ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        return await self._passed(
            ctx, f"resource:{uri}", lambda s: passthrough.read_resource(s, uri)
        )

    async def _subscribe(self, ctx: Any, params: Any) -> Any:
        from mcp.types import EmptyResult

        uri = str(params.uri)
        await self._passed(
            ctx, f"subscribe:{uri}", lambda s: passthrough.subscribe(s, uri, on=True)
        )
        self._subscribers.setdefault(uri, {})[id(_connection(ctx))] = ctx.session
        return EmptyResult()

    async def _unsubscribe(self, ctx: Any, params: Any) -> Any:
        from mcp.types import EmptyResult

        uri = str(params.uri)
        subs = self._subscribers.get(uri, {})
        subs.pop(id(_connection(ctx)), None)
        if not subs:
            self._subscribers.pop(uri, None)
            await self._passed(
                ctx, f"unsubscribe:{uri}", lambda s: passthrough.subscribe(s, uri, on=False)
            )
        return EmptyResult()

    async def _list_prompts(self, ctx: Any, params: Any) -> Any:
        await self.ready()
        return await passthrough.list_prompts(await self._servers(ctx, self._caller(ctx)))

    async def _get_prompt(self, ctx: Any, params: Any) -> Any:
        name, args = str(params.name), params.arguments
        return await self._passed(
            ctx, f"prompt:{name}", lambda s: passthrough.get_prompt(s, name, args)
        )

    async def _complete(self, ctx: Any, params: Any) -> Any:
        await self.ready()
        return await passthrough.complete(await self._servers(ctx, self._caller(ctx)), params)

    async def _set_level(self, ctx: Any, params: Any) -> Any:
        from mcp.types import EmptyResult

        await self.ready()
        await passthrough.set_level(await self._servers(ctx, self._caller(ctx)), str(params.level))
        return EmptyResult()

    async def _passed(
        self, ctx: Any, what: str, run: Callable[[list[Upstream]], Awaitable[Any]]
    ) -> Any:
        """A pass-through request under the gateway's rules: rate-limited per caller and
        audited (attempt, then outcome), like a tool call; its caller's link set."""
        from mcp.shared.exceptions import MCPError
        from mcp.types import INVALID_REQUEST

        principal = self._caller(ctx)
        audit = self.ts.gateway.audit
        try:
            self._rate.check(principal, tool_id=what)
        except GatewayError as exc:
            audit.append(
                subject=principal.subject, tenant=principal.tenant, tool_id=what[:512],
                args_digest="", decision="denied", reason=exc.reason, latency_ms=0.0,
                status="refused",
            )  # fmt: skip
            raise MCPError(INVALID_REQUEST, f"refused ({exc.reason}): {exc}") from None
        await self.ready()
        started = time.perf_counter()
        attempt = audit.begin(
            subject=principal.subject, tenant=principal.tenant, tool_id=what[:512], args_digest=""
        )
        status, reason, detail = "error", "tool_failed", ""
        token = LINK.set(Link(ctx))
        try:
            answer = await run(await self._servers(ctx, principal))
            status, reason = "ok", "ok"
            return answer
        except MCPError as exc:
            detail = redact(exc.message)
            reason = "unknown" if exc.message.startswith("unknown ") else reason
            raise
        finally:
            LINK.reset(token)
            audit.complete(
                attempt,
                status=status,
                reason=reason,
                latency_ms=(time.perf_counter() - started) * 1000,
                detail=detail,
            )

    async def _on_upstream_notice(self, up: Upstream, message: Any) -> None:
        """Pass an upstream's resource and prompt notices on to this gateway's clients."""
        method = message.method
        if method == "notifications/resources/updated":
            uri = str(message.params.uri)
            for key, session in list(self._subscribers.get(uri, {}).items()):
                try:
                    await session.send_resource_updated(uri)
                except Exception:
                    self._subscribers.get(uri, {}).pop(key, None)
            return
        for key, session in list(self._sessions.items()):
            try:
                if method == "notifications/resources/list_changed":
                    await session.send_resource_list_changed()
                else:
                    await session.send_prompt_list_changed()
            except Exception:
                self._sessions.pop(key, None)

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
            up_now = sum(u.listed.is_set() or u is up for u in self.upstreams.servers.values())
            self._say(
                f"indexed {up.name!r}: {len(up.tools)} tools ({len(changed)} changed, "
                f"{len(gone)} gone); {up_now} of {len(self.upstreams.servers)} servers up"
            )
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


def _connection(ctx: Any) -> Any:
    return getattr(ctx.session, "_connection", ctx.session)


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
