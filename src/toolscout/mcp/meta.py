"""The two meta-tools every client can use: ``search_tools`` and ``call_tool``.

``search_tools(query, k)`` returns compact cards plus the full input schema of
each hit; ``call_tool(name, arguments)`` runs any tool by a name search gave (or
its id). Results are MCP ``CallToolResult``s: a JSON text block, the same JSON as
structured content, and ``isError`` for refusals and failures.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.types import CallToolResult, Tool

__all__ = [
    "CALL",
    "META_TOOLS",
    "SEARCH",
    "meta_tool_wire",
    "meta_tools",
    "result_wire",
    "text_result",
]

SEARCH, CALL = "search_tools", "call_tool"
META_TOOLS = (SEARCH, CALL)
_SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What you want to do, in plain words."},
        "k": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10,
            "description": "How many tools to return (default 5).",
        },
    },
    "required": ["query"],
}
_CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The tool's name as search_tools gave it."},
        "arguments": {
            "type": "object",
            "description": "The tool's arguments, per its inputSchema.",
            "additionalProperties": True,
        },
    },
    "required": ["name"],
}


def meta_tool_wire() -> list[dict[str, Any]]:
    """The two meta-tools as the wire has them (what :func:`meta_tools` validates; the
    early path of ``tools/list`` sends these, ``tests/test_mcp_front.py`` holds them to the
    SDK's serialisation)."""
    return [
        {
            "name": SEARCH,
            "title": "Search tools",
            "description": (
                "Find the tools for a task among every connected server's tools. Returns the "
                "best matches you may use, each with its name and full inputSchema; run one "
                "with call_tool."
            ),
            "inputSchema": json.loads(json.dumps(_SEARCH_SCHEMA)),  # a copy, nested too
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
        },
        {
            "name": CALL,
            "title": "Call a tool",
            "description": (
                "Run a tool that search_tools returned, by its name, with arguments that "
                "match its inputSchema."
            ),
            "inputSchema": json.loads(json.dumps(_CALL_SCHEMA)),
            "annotations": {"readOnlyHint": False, "destructiveHint": True},
        },
    ]


def meta_tools() -> list[Tool]:
    from mcp.types import Tool

    return [Tool.model_validate(wire) for wire in meta_tool_wire()]


def result_wire(payload: Any, *, error: bool = False) -> dict[str, Any]:
    """A tool result as the wire has it: ``payload`` as a JSON text block (a string as
    it is), the same JSON as structured content (a mapping, unless ``error``)."""
    text = payload if isinstance(payload, str) else json.dumps(payload, indent=1, default=str)
    wire: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if not error and isinstance(payload, Mapping):
        wire["structuredContent"] = dict(payload)
    wire["isError"] = error
    return wire


def text_result(payload: Any, *, error: bool = False) -> CallToolResult:
    from mcp.types import CallToolResult

    return CallToolResult.model_validate(result_wire(payload, error=error))
