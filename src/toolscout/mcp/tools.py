"""The gateway's tools: ``tools/list`` per listing mode, ``tools/call``, the meta-tools.

Per caller (:data:`~toolscout.mcp.config.MODES`): ``direct`` lists every tool the
caller is entitled to; ``dynamic`` the meta-tools plus the tools its searches found
(all of them when they fit in ``dynamic_limit``); ``meta`` just ``search_tools`` and
``call_tool``. A listed tool keeps its server's own name when no other upstream tool
has it (else ``server_tool``) and what its server says of it (description, title,
annotations, output schema, execution, icons, ``_meta``). Every search goes through
``Toolscout.adiscover`` (entitle first) and every call through ``Toolscout.aexecute``
(policy re-check, argument validation, audit, the discovery link). The catalog
follows each upstream's tool list (:meth:`ToolHandlers._on_tools`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolscout.discovery import inject
from toolscout.errors import ImportRefused, TokenError, ToolscoutError
from toolscout.mcp.callers import RECENT, GatewayBase, caller_key
from toolscout.mcp.meta import CALL, SEARCH, meta_tools, text_result
from toolscout.mcp.relay import LINK, Link
from toolscout.mcp.sdk import sdk_names
from toolscout.mcp.timeline import mark
from toolscout.mcp.upstream import Upstream
from toolscout.policy import Principal

if TYPE_CHECKING:
    from mcp.types import CallToolResult, Tool

__all__ = ["PASSED_FIELDS", "ToolHandlers"]

log = logging.getLogger(__name__)

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
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


class ToolHandlers(GatewayBase):
    """``tools/list`` and ``tools/call`` of the gateway, and the catalog kept in step."""

    async def _rewarm(self) -> None:
        """Warm up again after the catalog changed (:class:`~toolscout.mcp.server.MCPGateway`)."""

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
        ids = self.listed_ids(principal, mode)
        tools += self.render(ids)
        mark("first tools/list answered", once=True)
        self._listed_once.set()
        return ListToolsResult(tools=tools)

    def listed_ids(self, principal: Principal, mode: str) -> list[str]:
        """The ids of the tools ``tools/list`` shows ``principal`` in ``mode`` (beside the
        meta-tools, but in ``direct``)."""
        if mode == "direct":
            return [c.id for c in self.ts.entitled(principal)]
        if mode == "dynamic":
            entitled = [c.id for c in self.ts.entitled(principal)]
            if len(entitled) <= self.config.dynamic_limit:  # it all fits in the dynamic list
                return entitled
            allowed = set(entitled)
            return [i for i in self._state(principal).dynamic if i in allowed]
        return []

    def render(self, ids: Sequence[str]) -> list[Tool]:
        """MCP tools for catalog ids: the rendered name, the upstream's annotations and title."""
        from mcp.types import Tool

        return [Tool.model_validate(wire) for wire in self.render_wire(ids)]

    def render_wire(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """:meth:`render` as wire dicts (the standard library alone: the early path)."""
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
            out.append(rendered)
        return out

    def names(self) -> dict[str, str]:
        """Tool id → the name clients see: the upstream's own name when no other upstream
        tool has it (and it is no meta-tool's), else the catalog's ``server_tool`` name.
        Taken from the catalog, so names are the same before and after a server connects;
        made again only when the catalog's generation moved (every call asks)."""
        catalog = self.ts.catalog
        if self._names_key == catalog.generation:  # the generation read of this turn
            return self._names
        with catalog.pinned() as state:  # one generation read; the cards of that generation
            if self._names_key == state.generation:
                return self._names
            cards = [c for c in catalog.cards() if c.source.startswith("mcp:")]
        count: dict[str, int] = {}
        for card in cards:
            count[card.name] = count.get(card.name, 0) + 1
        names = {
            card.id: card.name
            for card in cards
            if count[card.name] == 1 and card.name not in (SEARCH, CALL) and _NAME.match(card.name)
        }
        self._names, self._by_name = names, {name: tid for tid, name in names.items()}
        self._names_key = state.generation
        return names

    def resolve(self, name: str) -> str:
        """The catalog id of a name a client used (unknown names are left as they are)."""
        self.names()
        return self._by_name.get(name, name)

    # -- tools/call -------------------------------------------------------------------
    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        try:
            principal = self._principal(ctx)
        except TokenError as exc:
            return text_result(f"refused ({exc.reason}): {exc}", error=True)
        self._remember_session(ctx)
        name, args = params.name, dict(params.arguments or {})
        if name not in (SEARCH, CALL):
            await self.ready()  # a first start: the first listings (bounded by connect_timeout_s)
        link = self._link(ctx, principal)
        token = LINK.set(link)
        try:
            if name != SEARCH and ctx.protocol_version in sdk_names().MODERN:
                # the upstream's questions go back in input-required rounds (mcp/rounds.py)
                return await self._rounds.run(
                    f"{caller_key(principal)}\x00tools/call",
                    link,
                    params,
                    lambda: self._run_call(principal, name, args, link),
                )
            return await self._run_call(principal, name, args, ctx)
        finally:
            LINK.reset(token)

    async def _run_call(
        self,
        principal: Principal,
        name: str,
        args: dict[str, Any],
        ctx: Any = None,
    ) -> CallToolResult:
        link = LINK.get()
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

    async def _search(
        self, ctx: Any, principal: Principal, args: Mapping[str, Any]
    ) -> CallToolResult:
        problem = self.search_problem(args)
        if problem is not None:
            return text_result(problem, error=True)
        mark("first search_tools received", once=True)
        await self.ready()  # a first start: the first listings (bounded by connect_timeout_s)
        mark("first search_tools: upstreams waited for", once=True)
        shortlist = await self.ts.adiscover(principal, args["query"], **self.search_options(args))
        mark("first search_tools: discovery done", once=True)
        payload = self.search_payload(principal, shortlist)
        mark("first search_tools answered", once=True)
        if self.add_found(principal, payload):
            await self._notify_tools_changed(ctx)
        return text_result(payload)

    def add_found(self, principal: Principal, payload: Mapping[str, Any]) -> bool:
        """In the ``dynamic`` mode, the tools a search found (its ``payload``) added to the
        caller's list; whether the list changed (the sessions are then told)."""
        if self.mode(principal) != "dynamic" or not payload["tools"]:
            return False
        state = self._state(principal)
        added = False
        # best match last, so it is the most recently used (the last to be dropped)
        for entry in reversed(payload["tools"][: self.config.dynamic_limit]):
            added |= entry["id"] not in state.dynamic
            state.dynamic[entry["id"]] = None
            state.dynamic.move_to_end(entry["id"])
        while len(state.dynamic) > self.config.dynamic_limit:
            state.dynamic.popitem(last=False)
            added = True
        return added

    def search_problem(self, args: Mapping[str, Any]) -> str | None:
        """What is wrong with ``search_tools``' arguments (None: nothing)."""
        query, k = args.get("query"), args.get("k", self.config.k)
        unknown = sorted(set(args) - {"query", "k"})
        if unknown:
            return f"search_tools: unknown argument {unknown[0]!r}"
        if not isinstance(query, str) or not query.strip():
            return "search_tools needs 'query': what you want to do"
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 10:
            return "search_tools: 'k' must be an integer from 1 to 10"
        return None

    def search_options(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """``Toolscout.discover``'s options for valid ``search_tools`` arguments."""
        return {"k": args.get("k", self.config.k), "fmt": "mcp", "tier": inject.Tier.PROGRESSIVE}

    def search_payload(self, principal: Principal, shortlist: Any) -> dict[str, Any]:
        """The answer to ``search_tools`` (its text and structured content) for a discovery's
        ``shortlist``, with the upstreams' state now; the caller's recent discoveries noted
        (the discovery link of its next calls). One function for the SDK's path and the one
        answered before the SDK is up (mcp/front.py)."""
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
            stored = {
                u.name for u in self.upstreams.servers.values() if u.config.prefix in self._stored
            }
            kept = [name for name in starting if name in stored]
            payload["indexing"] = (
                f"still indexing {len(starting)} of {len(self.upstreams.servers)} servers "
                f"({', '.join(starting)}); their tools appear as they come up"
                + (
                    f" (answered from the catalog stored at the last start for {', '.join(kept)}:"
                    " their current tools replace the stored ones when they are up)"
                    if kept
                    else ""
                )
            )
        if not found:
            payload["note"] = "no tool you may use matches; try other words"
        else:
            payload["next"] = "run one with call_tool(name, arguments)"
        return payload

    async def _execute(
        self, principal: Principal, name: str, args: dict[str, Any], link: Link | None = None
    ) -> CallToolResult:
        model: type[CallToolResult] = sdk_names().CallToolResult
        state = self._state(principal)
        _, did = state.recent.get(name, (None, None))
        result = await self.ts.aexecute(principal, self.resolve(name), args, discovery_id=did)
        if result.tool_id is not None and result.tool_id in state.dynamic:
            state.dynamic.move_to_end(result.tool_id)
        if result.ok and isinstance(result.value, Mapping):
            wire = {k: v for k, v in result.value.items() if k not in ("_meta", "resultType")}
            return model.model_validate(wire)
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
            return model.model_validate(wire)
        return text_result(f"{result.status} ({result.reason}): {result.message}", error=True)

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
            mark(f"upstream {up.name!r} listed and indexed ({len(changed)} changed)")
            up_now = sum(u.listed.is_set() or u is up for u in self.upstreams.servers.values())
            self._say(
                f"indexed {up.name!r}: {len(up.tools)} tools ({len(changed)} changed, "
                f"{len(gone)} gone); {up_now} of {len(self.upstreams.servers)} servers up"
            )
            for warning in up.warnings:
                log.warning("%s", warning)
        if changed or gone:
            await self._notify_tools_changed(None)
            if self._warmed.is_set():  # derive the new state and count its tokens now
                self._rewarm_task = asyncio.get_running_loop().create_task(self._rewarm())
