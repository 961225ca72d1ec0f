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

__all__ = ["CALL", "META_TOOLS", "SEARCH", "meta_tools", "text_result"]

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


def meta_tools() -> list[Tool]:
    from mcp.types import Tool, ToolAnnotations

    return [
        Tool(
            name=SEARCH,
            title="Search tools",
            description=(
                "Find the tools for a task among every connected server's tools. Returns the "
                "best matches you may use, each with its name and full inputSchema; run one "
                "with call_tool."
            ),
            input_schema=_SEARCH_SCHEMA,
            annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
        Tool(
            name=CALL,
            title="Call a tool",
            description=(
                "Run a tool that search_tools returned, by its name, with arguments that "
                "match its inputSchema."
            ),
            input_schema=_CALL_SCHEMA,
            annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True),
        ),
    ]


def text_result(payload: Any, *, error: bool = False) -> CallToolResult:
    from mcp.types import CallToolResult, TextContent

    text = payload if isinstance(payload, str) else json.dumps(payload, indent=1, default=str)
    structured = None if error or not isinstance(payload, Mapping) else dict(payload)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=error,
    )
