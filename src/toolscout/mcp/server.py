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

The parts, each its own module (imports go down this list, never up):

* ``server`` — :class:`MCPGateway`: assembly, lifecycle, the stdio and HTTP transports;
* ``front`` — ``tools/list`` and ``search_tools`` answered over stdio before the SDK is up;
* ``tasks`` — task-augmented calls and ``tasks/*`` (2025-11-25);
* ``tools`` — ``tools/list`` per listing mode, ``tools/call``, the meta-tools, indexing;
* ``resources`` — resources, templates, subscriptions, prompts, completion, logging;
* ``callers`` — who is calling, per-caller state, the sessions a request goes over;
* ``rounds`` — an upstream's questions put to 2026-07-28 callers (input-required);
* ``passthrough`` — the upstream side of resources, prompts, completion and logging;
* ``upstream`` — every upstream; each caller's own sessions (capabilities mirrored);
* ``connection`` — one upstream session: supervised, listed, called;
* ``relay`` — the link from a caller's request to the upstream work it causes;
* ``cards``, ``config``, ``meta``, ``processes``, ``wire`` — the shared nouns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from toolscout.errors import ConfigError, TokenError
from toolscout.mcp import early
from toolscout.mcp.config import GatewayConfig
from toolscout.mcp.early import SERVER_INFO, own_instructions
from toolscout.mcp.processes import kill_children
from toolscout.mcp.resources import ResourceHandlers
from toolscout.mcp.supervisor import POLL_S
from toolscout.mcp.tasks import TaskHandlers, tasks_capability
from toolscout.mcp.timeline import mark
from toolscout.mcp.upstream import Upstreams
from toolscout.policy import DEFAULT_ADMIN_SCOPE, PolicyConfig, Principal

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from toolscout.service import Toolscout

__all__ = ["MCPGateway", "check_transport"]

log = logging.getLogger(__name__)

#: seconds after start-up the embedder is loaded if no client has listed tools by then
WARM_AFTER_S = 2.0
#: a stored catalog's query encoder starts loading as soon as the catalog is open
EARLY_ENCODER = True
#: servers the stored catalog has tools of are started once the warm-up is done (or a
#: request needs one, or this many seconds after start-up): their processes do not compete
#: with the first search for the cores
STORED_AFTER_S = 5.0
DEFER_STORED = True
#: with a stored catalog and ``initialize`` answered by the early reader (stdio), the
#: warm-up starts as soon as the catalog is open, beside the SDK's import
EARLY_WARM = True
#: with tools/list and search_tools answered before the SDK is up (mcp/front.py), the SDK's
#: import waits (at most this many seconds) for the first search answered there, a request
#: left to the SDK or the end of stdin, so the first search has the interpreter to itself
#: (``TOOLSCOUT_SDK_WAIT_S`` sets it; 0 imports the SDK at once)
SDK_AFTER_FIRST_SEARCH_S = 2.0


def _sdk_wait_s() -> float:
    """How long the SDK's import waits for the first search answered early."""
    text = os.environ.get("TOOLSCOUT_SDK_WAIT_S", "").strip()
    if not text:
        return SDK_AFTER_FIRST_SEARCH_S
    try:
        wait = float(text)
    except ValueError:
        wait = -1.0
    if not 0 <= wait <= 600:
        raise ConfigError(f"TOOLSCOUT_SDK_WAIT_S must be seconds from 0 to 600, got {text!r}")
    return wait


class MCPGateway(TaskHandlers, ResourceHandlers):
    """Fronts the configured upstreams as one MCP server, over stdio or streamable HTTP."""

    def __init__(
        self,
        config: GatewayConfig,
        *,
        toolscout: Toolscout | None = None,
        errlog: TextIO | None = None,
        poll_s: float = POLL_S,
    ) -> None:
        self.config = config
        self.errlog = errlog
        self._init_state()
        self.upstreams = Upstreams(
            config,
            on_tools=self._indexed,
            errlog=errlog,
            poll_s=poll_s,
            on_notify=self._on_upstream_notice,
        )
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self.ts = toolscout if toolscout is not None else self._open_toolscout()
        if toolscout is None:  # its own catalog: no other connection of this process writes it
            self.ts.catalog.reuse_within_turn = True
        mark(f"catalog open ({len(self.ts.catalog)} tools)")
        if toolscout is None and EARLY_ENCODER and len(self.ts.catalog):
            # a stored catalog: the encoder loads while the MCP SDK is imported (most of it
            # is ONNX Runtime building its session, off the interpreter's lock)
            from toolscout.discovery.catalog import prefetch_models

            _marked("encoder loaded", prefetch_models(self.ts.catalog.embedder, tokens=False))
        #: the warm-up started before the SDK is imported (see :meth:`_warm_later`)
        self._early_warm: threading.Thread | None = None
        self._called_once = asyncio.Event()  # the first tools/call answered
        self.warms_with_catalog = False
        if toolscout is None and EARLY_WARM and len(self.ts.catalog) and early.begun():
            # initialize is answered by the early reader: the warm-up (the encoder's first
            # run, the caller's state derived) runs beside the SDK's import, on the core the
            # import leaves, instead of after the first tools/list
            self._early_warm = threading.Thread(target=self._warm, name="toolscout-warm")
            self._early_warm.start()
            self.warms_with_catalog = True
        if toolscout is None and early.begun():
            self._front()
        from mcp.server.subscriptions import InMemorySubscriptionBus

        mark("MCP SDK imported")

        from toolscout.gateway.limits import RateLimiter

        self._rate = RateLimiter.from_limits(self.ts.gateway.limits)
        self.bus = InMemorySubscriptionBus()
        self.server = self._build_server()
        mark("MCP server built")

    def _front(self) -> None:
        """Until the SDK is up, the early reader answers ``tools/list`` and ``search_tools``
        from the stored catalog (mcp/front.py) when the SDK's path would answer them from it
        too: every configured server has tools stored (none to wait for), none stale."""
        from toolscout.mcp.front import Front

        stale, stored = self._stored_servers()
        every = {s.prefix for s in self.config.servers} <= stored
        if self.config.principal is None or stale or not every or not len(self.ts.catalog):
            early.arm(None)
            return
        self._stored = stored  # as running() finds it
        early.arm(Front(self))
        mark("answering from the stored catalog")
        wait = _sdk_wait_s()
        if wait > 0:
            early.sdk_wanted(wait)
            mark("importing the MCP SDK")

    def _stored_servers(self) -> tuple[list[str], frozenset[str]]:
        """The ids of the stored tools of servers no longer configured, and the prefixes
        of the configured servers the stored catalog has tools of."""
        configured = {f"mcp:{s.name}" for s in self.config.servers}
        stale, stored = [], set()
        for spec in self.ts.catalog.specs():
            source = spec.card.source
            if source.startswith("mcp:") and source not in configured:
                stale.append(spec.id)
            elif source in configured:
                stored.add(spec.id.split("/", 1)[0] + "/")
        return stale, frozenset(stored)

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
            # the widest cap of any server: each server checks its own (mcp/connection.py)
            max_argument_bytes=max(
                [cfg.max_argument_bytes] + [s.policy.max_argument_bytes or 0 for s in cfg.servers]
            ),
        )
        return Toolscout.open(
            settings, executors={"*": self.upstreams}, policy=policy, limits=limits
        )

    def _build_server(self) -> Server[Any]:
        from mcp.server.lowlevel import NotificationOptions, Server
        from mcp.server.subscriptions import ListenHandler
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        class GatewayServer(Server[Any]):
            """Announces ``listChanged`` for tools to handshake-era clients too (HTTP), and
            the ``tasks`` capability on handshake-era connections (mcp/tasks.py)."""

            def get_capabilities(self, *args: Any, **kwargs: Any) -> Any:
                caps = super().get_capabilities(*args, **kwargs)
                if kwargs.get("protocol_version") not in MODERN_PROTOCOL_VERSIONS:
                    caps.tasks = tasks_capability()
                return caps

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
            server: Server[Any] = GatewayServer(  # type: ignore[call-overload]
                SERVER_INFO["name"],
                version=SERVER_INFO["version"],
                title=SERVER_INFO["title"],
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
        self.install_tasks(server)
        server.middleware.append(self._instructions_middleware)
        server.middleware.append(self._first_call_middleware)
        from mcp.types import NotificationParams

        server.add_notification_handler(
            "notifications/roots/list_changed", NotificationParams, self._roots_changed
        )
        return server

    async def _indexed(self, up: Any) -> None:
        """An upstream's tools arrived: index them."""
        await self._on_tools(up)

    async def _instructions_middleware(self, ctx: Any, call_next: Any) -> Any:
        """``initialize`` and ``server/discover`` carry the instructions for their caller:
        the gateway's own, then those of each upstream the caller can see (nothing awaited:
        ``initialize`` is answered with the read loop parked)."""
        result = await call_next(ctx)
        if ctx.method in ("initialize", "server/discover") and isinstance(result, dict):
            try:
                principal = self._principal(ctx)
            except TokenError:
                return result  # no caller, no upstream's instructions
            result["instructions"] = self.instructions(principal)
        return result

    async def _first_call_middleware(self, ctx: Any, call_next: Any) -> Any:
        """Notes the first ``tools/call`` answered (:meth:`_start_upstreams` waits for it);
        a session is told of tool-list changes from its ``notifications/initialized`` on
        (its first list may have been answered before the SDK was up: mcp/front.py)."""
        try:
            return await call_next(ctx)
        finally:
            if ctx.method == "tools/call":
                self._called_once.set()
            elif ctx.method == "notifications/initialized":
                self._remember_session(ctx)

    def instructions(self, principal: Principal | None = None) -> str:
        """The gateway's instructions for the mode it serves, then the own instructions of
        each upstream ``principal`` can see (:meth:`visible`; none without a caller)."""
        own = own_instructions(self.config.mode)
        parts = [own]
        if principal is not None and any(u.instructions for u in self.upstreams.servers.values()):
            parts += [
                f"[{u.name}] {u.instructions}" for u in self.visible(principal) if u.instructions
            ]
        return "\n\n".join(parts)

    # -- lifecycle -------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def running(self, *, wait_s: float | None = None) -> AsyncIterator[MCPGateway]:
        """Upstreams connected (each waited for at most ``connect_timeout_s``), then closed.

        Tools a persistent catalog still holds from servers no longer configured are
        removed first (upstream tools are the cards whose source is ``mcp:<server>``)."""
        stale, self._stored = self._stored_servers()
        if stale:
            await asyncio.to_thread(self.ts.catalog.remove, stale)
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
            starting = asyncio.get_running_loop().create_task(self._start_upstreams())
        try:
            yield self
        finally:
            if starting is not None and not starting.done():
                starting.cancel()
            await self.upstreams.aclose()
            with contextlib.suppress(Exception):
                await warming
            if self._rewarm_task is not None:
                with contextlib.suppress(Exception):
                    await self._rewarm_task

    async def _start_upstreams(self) -> None:
        """Every upstream, in the background: those the stored catalog has nothing of at
        once (a first start's lists wait for them); the others once the warm-up is done, a
        request needs one (:meth:`Upstreams.route`) or ``STORED_AFTER_S`` passed, so their
        processes starting do not hold the cores while the first search is answered from
        the stored catalog. A warm-up started with the catalog (``EARLY_WARM``) is usually
        done before the client's first request: then they wait for its first ``tools/call``
        answered too (the first search)."""
        if not DEFER_STORED or not self._stored:
            await self.upstreams.start()
            return
        first = asyncio.ensure_future(self.upstreams.start(skip=self._stored))
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STORED_AFTER_S):
                    await self._warmed.wait()
                    if self.warms_with_catalog:
                        await self._called_once.wait()
            mark("starting the stored servers")
            await asyncio.gather(first, self.upstreams.start())
        finally:
            first.cancel()

    async def _warm_later(self) -> None:
        if self._early_warm is not None:  # started with the catalog: wait for it
            thread, self._early_warm = self._early_warm, None
            try:
                await asyncio.to_thread(thread.join)
            finally:
                self._warmed.set()
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(WARM_AFTER_S):
                await self._listed_once.wait()
        try:
            await self._rewarm()
        finally:
            self._warmed.set()

    async def _rewarm(self) -> None:
        """Warm up off the loop, one at a time; asked again while one runs, once more after
        it (the catalog changed meanwhile)."""
        if self._warming.locked():
            self._warm_again = True
            return
        async with self._warming:
            self._warm_again = True
            while self._warm_again:
                self._warm_again = False
                await asyncio.to_thread(self._warm)

    def _warm(self) -> None:
        """The embedder loaded, then the caller's discovery state derived by one unrecorded
        discovery (which counts the tokens of what the caller may use: with the tokenizer
        only when no earlier process kept the counts of these renderings), and the counts
        kept for the next start (best effort). Run again after an upstream's tools changed,
        so the next start finds the counts of every tool it will show."""
        from toolscout.discovery.catalog import prefetch_models

        catalog = self.ts.catalog
        try:
            mark("warm-up started")
            for thread in prefetch_models(catalog.embedder, tokens=False):
                thread.join()
            mark("warm-up: models loaded")
            if self.config.principal is not None:
                catalog.discover(
                    "find the right tool", self.config.principal, k=1, fmt="mcp", record=False
                )
                mark("warm-up: the caller's state derived")
            catalog.keep_token_counts()
        except Exception as exc:  # a warm-up fault shows again, clearly, on first use
            log.info("warm-up: %s", exc)

    def close(self) -> None:
        kill_children()  # no stdio upstream outlives the gateway
        if self._early_warm is not None:  # never served: the warm-up ends before the catalog
            self._early_warm.join()
            self._early_warm = None
        self.ts.close()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def check(self, transport: str) -> None:
        check_transport(self.config, transport)

    async def serve_stdio(self) -> None:
        """Serve one client over this process's stdin/stdout."""
        from mcp.server.stdio import stdio_server

        from toolscout.mcp import fastcall, pipes

        self.check("stdio")
        started = early.take()  # `toolscout mcp serve` read (and maybe answered) initialize
        mark("serving stdio")
        async with self.running():
            if started is None:
                # pipes: stdin and stdout on the event loop, not a thread hop per line
                async with (
                    pipes.stdio() as (lines, out),
                    stdio_server(fastcall.over(self, lines, out), out) as (read, write),
                ):
                    await self.server.run(read, write, self.server.create_initialization_options())
                return
            # the SDK is up: the early reader stops; what it read and did not answer
            # (initialize, then every message left to the SDK, in order) comes first
            await asyncio.to_thread(started.handover)
            if "tools/list" in started.answered:
                self._listed_once.set()
            if "tools/call" in started.answered:
                self._called_once.set()  # the first search: the stored servers may start
            async with (
                pipes.stdio(started.read) as (lines, out),
                stdio_server(
                    stdin=fastcall.over(self, lines, out) or started.stdin(), stdout=out
                ) as (read, write),
            ):
                kept = early.Recorder(write, started, self.errlog, own=self.instructions())
                await self.server.run(read, kept, self.server.create_initialization_options())

    def http_app(self, *, host: str = "127.0.0.1", port: int = 8701) -> Any:
        """The Starlette app: ``/mcp`` behind bearer auth, plus protected-resource metadata."""
        from mcp.server.auth.settings import AuthSettings

        self.check("http")
        cfg = self.config
        if cfg.dev:  # loopback, no token wall, CORS for the Inspector (mcp/devmode.py)
            from toolscout.mcp.devmode import dev_app

            return dev_app(self.server, host=host)
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


def _marked(what: str, threads: list[Any]) -> None:
    """A timeline mark once ``threads`` end (only when the timeline is on)."""
    from toolscout.mcp.timeline import enabled

    if enabled() and threads:

        def wait() -> None:
            for thread in threads:
                thread.join()
            mark(what)

        threading.Thread(target=wait, name="toolscout-timeline", daemon=True).start()


def check_transport(config: GatewayConfig, transport: str) -> None:
    """Raise :class:`ConfigError` unless ``config`` can serve ``transport``."""
    if transport == "stdio" and config.principal is None:
        raise ConfigError(
            "the stdio transport needs a fixed caller: set toolscout.principal "
            '({"subject": ..., "scopes": [...]}) in the config'
        )
    if transport == "http" and config.jwt_key is None and not config.dev:
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
