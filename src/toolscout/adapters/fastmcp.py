"""FastMCP: a search transform backed by toolscout.

``mcp.add_transform(ToolscoutSearchTransform(ts, caller))`` replaces a FastMCP server's
tool listing with ``search_tools`` and ``call_tool``, as FastMCP's own
``BM25SearchTransform`` does, but the search is toolscout's: entitle first (the server's
auth-filtered tools, then toolscout's policy for ``caller``), hybrid lexical + dense
ranking, exact names first, abstention. The server's tools are indexed into the
toolscout catalog on the first search and again whenever they change (an unchanged
re-index costs nothing). ``caller`` is a bearer token, a ``Principal``, or a function of
the request's FastMCP ``Context`` returning one.

``call_tool`` runs through :meth:`Toolscout.execute` with the caller's token, as every
adapter does: the gateway verifies the token, re-checks the policy, validates the
arguments and audits the attempt; only then does :class:`FastMCPExecutor` (bound to the
server's tools) let FastMCP run the tool, still limited to the tools FastMCP's own auth
shows this request. A refusal or failure comes back to the client as an error result
(``refused: <reason>: ...``, worded as the gateway words it for every surface).

Tested against ``fastmcp==4.2.3`` (extra ``toolscout[fastmcp]``).
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from toolscout.cards import ToolSpec, make_spec
from toolscout.errors import ConfigError, ExecutorError, MissingExtraError
from toolscout.executors.base import TOOL_FAILED, clip

if TYPE_CHECKING:
    from toolscout.service import Caller, Toolscout

try:
    from fastmcp.server.context import Context
    from fastmcp.server.transforms.search.base import BaseSearchTransform
    from fastmcp.tools.base import Tool, ToolResult
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingExtraError("fastmcp", "fastmcp") from exc

SOURCE = "fastmcp"
#: reason of the executor's error when FastMCP's own auth hides the tool from the request
HIDDEN_BY_SERVER = "hidden_by_server"

#: the FastMCP request context of the ``call_tool`` being executed (read by the executor)
_CONTEXT: contextvars.ContextVar[Any] = contextvars.ContextVar("toolscout_fastmcp_ctx")


#: card fields a FastMCP tool may set in ``meta={"toolscout": {...}}``
CARD_META = ("scopes", "tenants", "risk", "aliases", "tags", "not_for", "group")


def specs_of(tools: Sequence[Any]) -> list[ToolSpec]:
    """FastMCP tools as toolscout specs: the tool name is the id (source ``fastmcp``); a
    tool's ``meta={"toolscout": {"scopes": [...], "risk": ...}}`` sets those card fields
    (:data:`CARD_META`; anything else there is refused by name)."""
    out = []
    for t in tools:
        extra = (getattr(t, "meta", None) or {}).get("toolscout") or {}
        if not isinstance(extra, Mapping) or set(extra) - set(CARD_META):
            wrong = sorted(set(extra) - set(CARD_META)) if isinstance(extra, Mapping) else extra
            raise ConfigError(
                f"FastMCP tool {t.name!r}: meta.toolscout may set {', '.join(CARD_META)}; "
                f"got {wrong!r}"
            )
        record = {"id": t.name, "name": t.name, "summary": t.description or "",
                  "parameters": t.parameters or {}, **extra}  # fmt: skip
        out.append(make_spec(record, default_source=SOURCE))
    return out


def _digest(tools: Sequence[Any]) -> str:
    blob = json.dumps([[t.name, t.description, t.parameters] for t in tools], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class FastMCPExecutor:
    """Runs an authorised call on the FastMCP server of the request being answered.

    The gateway calls it only after every check passed; it runs the tool with FastMCP's
    ``call_tool`` (the server's middleware included) if FastMCP's own auth shows the
    tool to this request, and raises :class:`ExecutorError` otherwise."""

    def __init__(self, transform: ToolscoutSearchTransform) -> None:
        self._transform = transform

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        ctx = _CONTEXT.get(None)
        if ctx is None:
            raise ExecutorError(
                f"{spec.id}: runs only inside the FastMCP server's call_tool",
                tool_id=spec.id,
                reason=HIDDEN_BY_SERVER,
            )
        visible = {t.name for t in await self._transform.get_tool_catalog(ctx)}
        name = spec.id if spec.id in visible else spec.card.name
        if name not in visible or name in self._transform.synthetic:
            raise ExecutorError(
                f"{spec.id}: the server does not offer this tool to this request",
                tool_id=spec.id,
                reason=HIDDEN_BY_SERVER,
            )
        try:
            return await ctx.fastmcp.call_tool(name, dict(arguments))
        except Exception as exc:
            raise ExecutorError(
                f"{spec.id}: the tool failed", tool_id=spec.id, reason=TOOL_FAILED, detail=clip(exc)
            ) from None

    async def aclose(self) -> None:
        return None


class ToolscoutSearchTransform(BaseSearchTransform):  # type: ignore[misc]
    """``search_tools`` answered by toolscout's discovery; ``call_tool`` through its gateway."""

    def __init__(
        self,
        toolscout: Toolscout,
        caller: Caller | Callable[[Any], Caller],
        *,
        max_results: int = 5,
        always_visible: list[str] | None = None,
        search_tool_name: str = "search_tools",
        call_tool_name: str = "call_tool",
        index: bool = True,
    ) -> None:
        super().__init__(
            max_results=max_results,
            always_visible=always_visible,
            search_tool_name=search_tool_name,
            call_tool_name=call_tool_name,
        )
        self.toolscout = toolscout
        self._caller = caller
        self._index = index
        self._indexed = ""
        self._lock = asyncio.Lock()
        self.executor = FastMCPExecutor(self)
        self.synthetic = frozenset({search_tool_name, call_tool_name})

    def caller(self, ctx: Any) -> Caller:
        return self._caller(ctx) if callable(self._caller) else self._caller

    async def sync(self, tools: Sequence[Any]) -> None:
        """Bind the server's tools to :attr:`executor` and (with ``index``) index them into
        the catalog when they changed since last time."""
        digest = _digest(tools)
        async with self._lock:
            if digest == self._indexed:
                return
            self.toolscout.bind(self._ids(tools), self.executor)
            if self._index:
                await asyncio.to_thread(self.toolscout.add, specs_of(tools))
            self._indexed = digest

    def _ids(self, tools: Sequence[Any]) -> list[str]:
        """The catalog ids of the server's tools (a tool indexed under another id is
        found by its name)."""
        catalog = self.toolscout.catalog
        return [catalog.resolve(t.name) or t.name for t in tools]

    async def search(self, tools: Sequence[Any], query: str, caller: Caller) -> list[Any]:
        """The visible tools toolscout's discovery chose for ``query``, best first."""
        await self.sync(tools)
        found = await self.toolscout.adiscover(caller, query, k=self._max_results)
        by_name = {t.name: t for t in tools}
        catalog = self.toolscout.catalog
        out = []
        for tool_id in found.ids:
            card = catalog.card(tool_id)
            name = tool_id if tool_id in by_name else (card.name if card else "")
            if name in by_name:
                out.append(by_name[name])
        return out

    async def _search(self, tools: Sequence[Any], query: str) -> Sequence[Any]:
        return await self.search(tools, query, self.caller(None))

    def _make_search_tool(self) -> Any:
        transform = self

        async def search_tools(
            query: Annotated[str, "The task, in a few words, or select:<tool name>"],
            ctx: Context = None,  # type: ignore[assignment]
        ) -> str | list[dict[str, Any]]:
            """Search the server's tools for a task; returns their definitions, best first."""
            hidden = await transform._get_visible_tools(ctx)
            results = await transform.search(hidden, query, transform.caller(ctx))
            return await transform._render_results(results)  # type: ignore[no-any-return]

        return Tool.from_function(fn=search_tools, name=self._search_tool_name)

    def _make_call_tool(self) -> Any:
        transform = self

        async def call_tool(
            name: Annotated[str, "The name of the tool to call"],
            arguments: Annotated[dict[str, Any] | None, "Arguments to pass to the tool"] = None,
            ctx: Context = None,  # type: ignore[assignment]
        ) -> Any:
            """Call a tool found with search_tools, by name, with its arguments."""
            await transform.sync(await transform._get_visible_tools(ctx))
            token = _CONTEXT.set(ctx)
            try:
                result = await transform.toolscout.aexecute(
                    transform.caller(ctx), name, arguments if arguments is not None else {}
                )
            finally:
                _CONTEXT.reset(token)
            if not result.ok:  # an error result, as FastMCP sends one (not a server fault)
                meta = {"status": result.status, "reason": result.reason,
                        "audit_id": result.audit_id}  # fmt: skip
                return ToolResult(result.content(), meta={"toolscout": meta}, is_error=True)
            if isinstance(result.value, ToolResult):
                return result.value
            return result.content()

        return Tool.from_function(fn=call_tool, name=self._call_tool_name)
