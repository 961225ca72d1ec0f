"""Cards from upstream MCP tools.

:func:`tool_spec` makes the card of one upstream tool: id ``<server>/<tool>``
(sanitised, unique), summary from the description (a missing one is a warning,
not a refusal), the ``inputSchema`` kept (an invalid one is replaced by an open
object schema, with a warning), ``readOnlyHint``/``destructiveHint`` read as
risk, the title as an alias, then the server's ``toolscout`` section (scopes,
risk, aliases, not-for hints, tags, tenants; hidden tools left out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolscout.cards import Risk, ToolSpec, make_spec
from toolscout.errors import CardError
from toolscout.mcp.config import ServerConfig, safe_name

__all__ = ["UpstreamTool", "specs_from_tools", "tool_id", "tool_spec"]

_ID_MAX = 200


@dataclass(frozen=True, slots=True)
class UpstreamTool:
    """One upstream tool as the gateway indexed it."""

    server: str
    name: str
    spec: ToolSpec
    #: the tool as the upstream published it (MCP wire form: annotations, title, ...)
    wire: Mapping[str, Any]
    warnings: tuple[str, ...] = ()


def _risk(annotations: Mapping[str, Any] | None) -> Risk:
    """MCP hints to risk: read-only → read; explicitly not destructive → write; hints
    that leave ``destructiveHint`` at its default (true) → destructive. A tool with no
    hints at all says nothing either way: write (it needs its server's scope, not the
    admin scope, so fronting a server loses none of its plain tools; a client still sees
    the tool's own missing hints, and a ``toolscout`` section can set any risk)."""
    if not annotations:
        return Risk.WRITE
    hints = annotations
    if hints.get("readOnlyHint") is True:
        return Risk.READ
    if hints.get("destructiveHint") is False:
        return Risk.WRITE
    return Risk.DESTRUCTIVE


def _first_sentence(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    stop = cut.rfind(". ")
    return cut[: stop + 1] if stop > 80 else cut.rstrip() + "…"


def tool_id(server: ServerConfig, tool: str, taken: set[str]) -> str:
    """``<server>/<tool>`` sanitised; a clash gets ``~2``, ``~3``, ... appended."""
    base = (server.prefix + safe_name(tool))[:_ID_MAX]
    out, n = base, 1
    while out in taken:
        n += 1
        out = f"{base[: _ID_MAX - 4]}~{n}"
    taken.add(out)
    return out


def tool_spec(server: ServerConfig, wire: Mapping[str, Any], taken: set[str]) -> UpstreamTool:
    """The card of one upstream tool (``wire`` is its ``tools/list`` entry, by alias)."""
    name = str(wire.get("name") or "")
    tid = tool_id(server, name or "unnamed", taken)
    warnings: list[str] = []
    annotations = wire.get("annotations") if isinstance(wire.get("annotations"), Mapping) else None
    title = wire.get("title") or (annotations or {}).get("title")
    desc = wire.get("description")
    if isinstance(desc, str) and desc.strip():
        summary = _first_sentence(desc)
    else:
        warnings.append(f"{tid}: the upstream gives no description; indexed by its name")
        summary = str(title or " ".join(safe_name(name).replace("_", " ").split()) or tid)
    scopes, risk_override, rule = server.policy.for_tool(name)
    aliases = [str(title)] if isinstance(title, str) and title.strip() else []
    card: dict[str, Any] = {
        "id": tid,
        "name": name or tid,
        "summary": summary,
        "scopes": list(scopes),
        "tenants": list(server.policy.tenants),
        "tags": list(rule.tags),
        "aliases": aliases + list(rule.aliases),
        "not_for": list(rule.not_for),
        "group": server.policy.group,
        "risk": (risk_override or _risk(annotations)).value,
        "source": f"mcp:{server.name}",
        "parameters": wire.get("inputSchema") or {"type": "object"},
    }
    out_schema = wire.get("outputSchema")
    if isinstance(out_schema, Mapping):
        card["output_schema"] = out_schema
    try:
        spec = make_spec(card)
    except CardError as exc:
        if exc.field not in ("parameters", "output_schema"):
            raise
        warnings.append(f"{tid}: {exc.reason}; indexed with an open argument schema")
        card["parameters"] = {"type": "object", "additionalProperties": True}
        card.pop("output_schema", None)
        spec = make_spec(card)
    return UpstreamTool(server.name, name, spec, dict(wire), tuple(warnings))


def specs_from_tools(
    server: ServerConfig, tools: Sequence[Mapping[str, Any]]
) -> tuple[list[UpstreamTool], list[str]]:
    """Cards for a server's tools, hidden ones left out; (tools, warnings)."""
    taken: set[str] = set()
    out: list[UpstreamTool] = []
    warnings: list[str] = []
    for wire in tools:
        name = str(wire.get("name") or "")
        if server.policy.hidden(name):
            continue
        try:
            tool = tool_spec(server, wire, taken)
        except CardError as exc:  # a card field the config set is wrong: skip that tool only
            warnings.append(f"{server.name}/{name}: skipped: {exc}")
            continue
        out.append(tool)
        warnings.extend(tool.warnings)
    return out, warnings
