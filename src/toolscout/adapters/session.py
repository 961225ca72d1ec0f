"""One caller's conversation with a model, as every adapter sees it.

A :class:`Session` holds what the provider formats share: the caller (a bearer token,
verified by the gateway on every call, or a trusted ``Principal``), the conversation id
that links executions to discoveries, the pinned tools, the mode, the searches made so
far and the cache-stable list of tools sent (:class:`~toolscout.adapters.toollist.ToolList`).

Modes (:class:`Mode`): ``deferred`` sends every entitled tool marked for deferred
loading plus a search tool the client answers; ``plain`` sends only shortlists; ``auto``
(the default) is deferred when the API has deferred loading and the caller's entitled
catalog is past the tier threshold (``inject.choose_tier`` gives ``progressive``), else
plain — the same code, no configuration. In plain mode below the threshold every
entitled tool is sent (the ``all`` and ``groups`` tiers of discovery).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from toolscout.adapters.toollist import ToolList
from toolscout.discovery import inject as rendering
from toolscout.discovery.pinned import pinned_ids
from toolscout.discovery.tokencount import count_json
from toolscout.errors import ConfigError

if TYPE_CHECKING:
    from toolscout.discovery.shortlist import Shortlist
    from toolscout.gateway.result import ExecutionResult
    from toolscout.service import Caller, Toolscout

#: the client-side search tool's name (every format)
SEARCH_TOOL = "search_tools"
SEARCH_DESCRIPTION = (
    "Find the tools for a task among the deferred ones and load them. Describe the task "
    "in a few words, or write select:<tool name> for a tool you know by name."
)
SEARCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "the task, or select:<tool name>"}},
    "required": ["query"],
}


class Mode(StrEnum):
    AUTO = "auto"
    DEFERRED = "deferred"
    PLAIN = "plain"


def _mode(value: Mode | str) -> Mode:
    try:
        return Mode(value)
    except ValueError:
        allowed = ", ".join(m.value for m in Mode)
        raise ConfigError(f"unknown adapter mode {value!r}; expected one of: {allowed}") from None


def tool_name(schema: Mapping[str, Any]) -> str:
    """The function name in a rendered schema of any format."""
    fn = schema.get("function")
    if isinstance(fn, Mapping):
        return str(fn.get("name", ""))
    return str(schema.get("name", ""))


def parse_arguments(raw: Any) -> Any:
    """A model's arguments: JSON text decoded (left as text if it is not JSON, so the
    gateway's validation refuses it with a reason), anything else as given."""
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw
    return raw


class Session:
    """A caller's conversation: pinned tools, searches, the tools sent, executions."""

    def __init__(
        self,
        toolscout: Toolscout,
        caller: Caller,
        *,
        fmt: str,
        k: int = 5,
        mode: Mode | str = Mode.AUTO,
        deferred: bool = True,
        conversation: str | None = None,
    ) -> None:
        self.toolscout = toolscout
        self.caller = caller
        self.fmt = fmt
        self.k = k
        self.conversation = conversation or f"conv_{uuid.uuid4().hex[:16]}"
        principal = toolscout.principal(caller)
        catalog = toolscout.catalog
        ent = catalog.entitle(principal)
        self.tier = rendering.choose_tier(len(ent.ids))
        wanted = _mode(mode)
        if wanted is Mode.DEFERRED and not deferred:
            raise ConfigError(f"the {fmt} API has no deferred tool loading; use mode='plain'")
        if wanted is Mode.AUTO:
            progressive = self.tier is rendering.Tier.PROGRESSIVE
            wanted = Mode.DEFERRED if deferred and progressive else Mode.PLAIN
        self.mode = wanted
        self.pinned: tuple[str, ...] = pinned_ids(catalog.policy, principal, ent)
        self.sent = ToolList()
        self.sent.extend(self.rendered(self.pinned))
        self.searches: list[Shortlist] = []
        self.loaded: list[str] = []  # tools expanded by searches (deferred mode), in order
        self.last_discovery: str | None = None
        self._planned: str | None = None

    # -- tools -------------------------------------------------------------------
    def rendered(self, ids: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
        """(id, schema in this session's format) for ``ids``, in order."""
        if not ids:
            return []
        catalog = self.toolscout.catalog
        specs = catalog.specs_of(list(ids))
        schemas = rendering.render(specs, self.fmt, catalog.names())
        return [(s.id, schema) for s, schema in zip(specs, schemas, strict=True)]

    def entitled_ids(self) -> list[str]:
        """The caller's entitled tool ids now, in catalog order (re-read every turn)."""
        return [c.id for c in self.toolscout.entitled(self.caller)]

    def search(self, query: str) -> Shortlist:
        """One discovery for this caller and conversation; remembered for execution links
        (raises :class:`~toolscout.errors.QueryError` for an empty or oversized query)."""
        found = self.toolscout.discover(
            self.caller, query, k=self.k, fmt=self.fmt, conversation=self.conversation
        )
        self.searches.append(found)
        if found.discovery_id is not None:
            self.last_discovery = found.discovery_id
        for tool_id in found.ids:
            if tool_id not in self.loaded:
                self.loaded.append(tool_id)
        return found

    def plain_tools(self, query: str | None) -> list[dict[str, Any]]:
        """Plain mode's tool list for the next request: the tools sent so far, then the
        new ones the request needs (every entitled tool below the tier threshold)."""
        if self.tier is not rendering.Tier.PROGRESSIVE:
            self.sent.extend(self.rendered(self.entitled_ids()))
        elif query and query != self._planned:
            self._planned = query  # a tool-result turn repeats the request: no new search
            found = self.search(query)
            by_name = {tool_name(s): s for s in found.schemas}
            items = [(found.names[n], s) for n, s in by_name.items() if n in found.names]
            self.sent.extend(items)
        return self.sent.tools

    def execute(self, name: str, arguments: Any) -> ExecutionResult:
        """A model's tool call, through the gateway with the caller's token."""
        return self.toolscout.execute(
            self.caller,
            name,
            parse_arguments(arguments),
            discovery_id=self.last_discovery,
            conversation=self.conversation,
        )

    async def aexecute(self, name: str, arguments: Any) -> ExecutionResult:
        """:meth:`execute` for async agent loops."""
        return await self.toolscout.aexecute(
            self.caller,
            name,
            parse_arguments(arguments),
            discovery_id=self.last_discovery,
            conversation=self.conversation,
        )

    def load(self, found: Shortlist) -> list[tuple[str, dict[str, Any]]]:
        """Append a search's tools to the tools sent; the (id, schema) of the new ones."""
        items = self.rendered(found.ids)
        new = set(self.sent.extend(items))
        return [(t, s) for t, s in items if t in new]

    def refusal(self, name: str) -> ExecutionResult | None:
        """For a call of a tool the agent has not registered: the gateway's refusal if the
        caller may not use it (audited like any call), None if it may (it is only unloaded)."""
        principal = self.toolscout.principal(self.caller)
        tool_id = self.toolscout.catalog.resolve(name)
        if tool_id is not None and self.toolscout.catalog.decide(principal, tool_id).allowed:
            return None
        return self.execute(name, {})

    # -- figures -----------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        """Tokens: the whole entitled catalog in this format, the pinned tools, the tools
        the model was actually shown (plain: the list sent; deferred: what searches loaded,
        plus the pinned and the search tool)."""
        principal = self.toolscout.principal(self.caller)
        catalog_tokens = self.toolscout.catalog.entitled_tokens(principal, self.fmt)
        pinned = count_json([s for _, s in self.rendered(self.pinned)]) if self.pinned else 0
        if self.mode is Mode.PLAIN:
            shown = count_json(self.sent.tools) if len(self.sent) else 0
        else:
            loaded = [s for _, s in self.rendered(self.loaded)]
            shown = pinned + count_json([*loaded, self.search_tool_schema()])
        return {
            "mode": self.mode.value,
            "catalog": catalog_tokens,
            "pinned": pinned,
            "shown": shown,
            "searches": len(self.searches),
        }

    def search_tool_schema(self) -> dict[str, Any]:
        """The client-side search tool in this session's format (token figures)."""
        return {
            "name": SEARCH_TOOL,
            "description": SEARCH_DESCRIPTION,
            "parameters": SEARCH_PARAMETERS,
        }


def search_answer(session: Session, arguments: Any) -> tuple[Shortlist | None, str]:
    """Run a model's search call: the shortlist, or None and the message to return."""
    from toolscout.errors import QueryError

    query = arguments.get("query") if isinstance(arguments, Mapping) else None
    if not isinstance(query, str) or not query.strip():
        return None, f"{SEARCH_TOOL} needs a non-empty 'query' string"
    try:
        return session.search(query), ""
    except QueryError as exc:
        return None, f"{SEARCH_TOOL}: {exc}"


def abstained_text(found: Shortlist) -> str:
    """What a search answers when discovery abstained: the reason and the confidence."""
    return (
        f"No available tool fits this request ({found.abstained}, confidence "
        f"{found.confidence:.2f}). Answer without a tool, or search again in other words."
    )
