"""Resources, templates, subscriptions, prompts, completion and logging, passed through.

Each handler entitles the caller to the servers whose scopes and tenants it holds
(:func:`~toolscout.mcp.passthrough.servers_for`), routes the request over the
caller's own upstream sessions and, for reads, prompts and subscriptions, rate-limits
and audits it like a tool call (:meth:`ResourceHandlers._passed`). Upstream notices
(``resources/updated`` to the sessions subscribed to the URI, resource and prompt
``list_changed`` to every session) are passed on.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

from toolscout.errors import GatewayError, TokenError
from toolscout.mcp import passthrough
from toolscout.mcp.callers import GatewayBase, caller_key, connection_of
from toolscout.mcp.relay import LINK, Link
from toolscout.mcp.upstream import Upstream
from toolscout.policy import Principal
from toolscout.redact import redact

__all__ = ["ResourceHandlers"]


class ResourceHandlers(GatewayBase):
    """The pass-through handlers of the gateway (everything but tools)."""

    async def _roots_changed(self, ctx: Any, params: Any) -> None:
        """A client's roots changed: its open upstream sessions are told (they ask again)."""
        try:
            principal = self._principal(ctx)
        except TokenError:
            return
        link = self._link(ctx, principal)
        for up in self.servers_for(principal):
            session = self.upstreams.existing(up, link)
            if session is None or "roots" not in session.relay.capabilities:
                continue
            client = session.client
            if client is not None:
                with contextlib.suppress(Exception), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # roots: deprecated in 2026-07-28, not gone
                    await client.send_roots_list_changed()  # a gone upstream: it reconnects

    async def _list_resources(self, ctx: Any, params: Any) -> Any:
        await self.ready()
        return await passthrough.list_resources(await self._servers(ctx, self._caller(ctx)))

    async def _list_templates(self, ctx: Any, params: Any) -> Any:
        await self.ready()
        return await passthrough.list_templates(await self._servers(ctx, self._caller(ctx)))

    async def _read_resource(self, ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        return await self._passed(
            ctx, f"resource:{uri}", lambda s: passthrough.read_resource(s, uri), rounds=params
        )

    async def _subscribe(self, ctx: Any, params: Any) -> Any:
        from mcp.types import EmptyResult

        uri = str(params.uri)
        await self._passed(
            ctx, f"subscribe:{uri}", lambda s: passthrough.subscribe(s, uri, on=True)
        )
        self._subscribers.setdefault(uri, {})[id(connection_of(ctx))] = ctx.session
        return EmptyResult()

    async def _unsubscribe(self, ctx: Any, params: Any) -> Any:
        from mcp.types import EmptyResult

        uri = str(params.uri)
        subs = self._subscribers.get(uri, {})
        subs.pop(id(connection_of(ctx)), None)
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
            ctx, f"prompt:{name}", lambda s: passthrough.get_prompt(s, name, args), rounds=params
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
        self,
        ctx: Any,
        what: str,
        run: Callable[[list[Upstream]], Awaitable[Any]],
        *,
        rounds: Any = None,
    ) -> Any:
        """A pass-through request under the gateway's rules: rate-limited per caller and
        audited (attempt, then outcome), like a tool call; its caller's link set.

        A request that may carry input-required rounds (``rounds``: its params; the
        2026-07-28 protocol allows them for ``resources/read`` and ``prompts/get``, as for
        ``tools/call``) from a 2026-07-28 caller gets its upstream's questions back as an
        ``InputRequiredResult``, and its retry resumes the waiting upstream request
        (:mod:`~toolscout.mcp.rounds`; checked and audited once, when it began)."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        principal = self._caller(ctx)
        link = self._link(ctx, principal)
        if rounds is None or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return await self._checked(ctx, principal, link, what, run)
        token = LINK.set(link)
        try:
            return await self._rounds.run(
                f"{caller_key(principal)}\x00{ctx.method}",
                link,
                rounds,
                lambda: self._checked(ctx, principal, link, what, run),
            )
        finally:
            LINK.reset(token)

    async def _checked(
        self,
        ctx: Any,
        principal: Principal,
        link: Link,
        what: str,
        run: Callable[[list[Upstream]], Awaitable[Any]],
    ) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp.types import INVALID_REQUEST

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
        token = LINK.set(link)
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
