"""A cache-stable tool list: tools already sent keep their position and bytes.

Prompt caches key on the request prefix, and the tool list comes first. Across the
turns of one conversation a :class:`ToolList` only ever appends: a tool found on turn
3 goes after every tool sent on turns 1–2, and a tool sent before is never re-rendered
(its first rendering is kept), so the serialised prefix never changes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any


def serialise(tools: Iterable[Mapping[str, Any]]) -> bytes:
    """The bytes a JSON client sends for a tool list (compact, keys in insertion order)."""
    return json.dumps(list(tools), separators=(",", ":"), ensure_ascii=False).encode()


class ToolList:
    """An append-only, de-duplicated list of rendered tools keyed by tool id."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._tools: dict[str, dict[str, Any]] = {}

    def extend(self, items: Iterable[tuple[str, dict[str, Any]]]) -> list[str]:
        """Append the tools not sent yet, in order; the ids that were new."""
        new: list[str] = []
        for tool_id, schema in items:
            if tool_id not in self._tools:
                self._tools[tool_id] = json.loads(json.dumps(schema))  # a frozen copy
                self._ids.append(tool_id)
                new.append(tool_id)
        return new

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The list to send: the same objects every turn, in first-sent order."""
        return [self._tools[t] for t in self._ids]

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self._tools
