"""FastMCP: a search transform backed by toolscout.

``mcp.add_transform(ToolscoutSearchTransform(ts, caller))`` replaces a FastMCP server's
tool listing with ``search_tools`` and ``call_tool``, as FastMCP's own
``BM25SearchTransform`` does, but the search is toolscout's: entitle first (the server's
auth-filtered tools, then toolscout's policy for ``caller``), hybrid lexical + dense
ranking, exact names first, abstention. The server's tools are indexed into the
toolscout catalog on the first search and again whenever they change (an unchanged
re-index costs nothing). ``caller`` is a bearer token, a ``Principal``, or a function of
the request's FastMCP ``Context`` returning one.

``call_tool`` re-checks the caller's entitlement with the same policy function the
gateway uses and refuses what it may not use, then lets FastMCP run the server's own
tool (the server is the executor here; it is not routed through ``Toolscout.execute``).

Tested against ``fastmcp==4.2.3`` (extra ``toolscout[fastmcp]``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from toolscout.cards import ToolSpec, make_spec
from toolscout.errors import MissingExtraError

if TYPE_CHECKING:
    from toolscout.service import Caller, Toolscout

try:
    from fastmcp.server.context import Context
    from fastmcp.server.transforms.search.base import BaseSearchTransform
    from fastmcp.tools.base import Tool
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingExtraError("fastmcp", "fastmcp") from exc

SOURCE = "fastmcp"


def specs_of(tools: Sequence[Any]) -> list[ToolSpec]:
    """FastMCP tools as toolscout specs: the tool name is the id (source ``fastmcp``)."""
    return [
        make_spec(
            {
                "id": t.name,
                "name": t.name,
                "summary": t.description or "",
                "parameters": t.parameters or {},
            },
            default_source=SOURCE,
        )
        for t in tools
    ]


def _digest(tools: Sequence[Any]) -> str:
    blob = json.dumps([[t.name, t.description, t.parameters] for t in tools], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class ToolscoutSearchTransform(BaseSearchTransform):  # type: ignore[misc]
    """``search_tools`` answered by toolscout's discovery; ``call_tool`` re-checked."""

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

    def caller(self, ctx: Any) -> Caller:
        return self._caller(ctx) if callable(self._caller) else self._caller

    async def sync(self, tools: Sequence[Any]) -> None:
        """Index the server's tools into the catalog when they changed since last time."""
        if not self._index:
            return
        digest = _digest(tools)
        async with self._lock:
            if digest != self._indexed:
                await asyncio.to_thread(self.toolscout.add, specs_of(tools))
                self._indexed = digest

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
        proxy = super()._make_call_tool()
        transform = self
        inner = proxy.fn  # type: ignore[attr-defined]

        async def call_tool(
            name: Annotated[str, "The name of the tool to call"],
            arguments: Annotated[dict[str, Any] | None, "Arguments to pass to the tool"] = None,
            ctx: Context = None,  # type: ignore[assignment]
        ) -> Any:
            """Call a tool found with search_tools, by name, with its arguments."""
            principal = transform.toolscout.principal(transform.caller(ctx))
            tool_id = transform.toolscout.catalog.resolve(name)
            allowed = tool_id is not None and (
                transform.toolscout.catalog.decide(principal, tool_id).allowed
            )
            if not allowed:
                raise ValueError(f"refused: unknown_tool: {str(name)[:256]}: no such tool")
            return await inner(name=name, arguments=arguments, ctx=ctx)

        return Tool.from_function(fn=call_tool, name=self._call_tool_name)
