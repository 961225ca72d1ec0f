"""The catalog page: the cards an administrator may see, filtered, with lint findings,
quality warnings and the overlapping pairs (lint's own checks, run on those cards)."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from toolscout.cards import ToolSpec
from toolscout.console.access import Level, sees_tool, shown_tenants
from toolscout.lint.findings import Finding, OverlapPair
from toolscout.policy import Principal

PAGE = 25
#: pairs drawn when none collides (the most confused first)
CLOSEST = 8


@dataclass(frozen=True, slots=True)
class Filters:
    q: str = ""
    source: str = ""
    group: str = ""
    risk: str = ""
    scope: str = ""
    tenant: str = ""

    def keep(self, spec: ToolSpec) -> bool:
        c = spec.card
        text = f"{c.id} {c.name} {c.summary} {' '.join(c.tags)} {' '.join(c.aliases)}".lower()
        return (
            (not self.q or self.q.lower() in text)
            and (not self.source or c.source == self.source)
            and (not self.group or c.group == self.group)
            and (not self.risk or c.risk.value == self.risk)
            and (not self.scope or self.scope in c.scopes)
            and (
                not self.tenant
                or (self.tenant == "-" and not c.tenants)
                or self.tenant in c.tenants
            )
        )


@dataclass(frozen=True, slots=True)
class Row:
    spec: ToolSpec
    tenants: str
    schema: str
    findings: tuple[Finding, ...]
    warnings: tuple[str, ...]


class OverlapCache:
    """Overlap is measured with retrieval over every visible card (seconds on a few hundred
    tools): kept per catalog generation and set of tools, computed only when asked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[tuple[int, frozenset[str]], tuple[list[OverlapPair], int]] = {}

    def get(
        self, service: Any, specs: list[ToolSpec], *, measure: bool
    ) -> list[OverlapPair] | None:
        from toolscout.lint.run import overlap_pairs

        key = (int(service.catalog.generation), frozenset(s.id for s in specs))
        with self._lock:
            if key in self._done:
                return self._done[key][0]
            if not measure or len(specs) < 2:
                return None
            found = overlap_pairs(service.catalog, specs)
            self._done = {key: found}  # one generation at a time
            return found[0]


@dataclass(frozen=True, slots=True)
class Upstream:
    label: str
    state: str
    tools: int


def upstreams(service: Any, viewer: Principal, level: Level) -> list[Upstream]:
    """The upstream MCP servers this process calls, as far as its executors know them:
    reconnecting (and in how long) or with no failure seen, and the visible tools each
    serves."""
    from toolscout.executors.mcp import MCPExecutor

    gateway = getattr(service, "gateway", None)
    bound = dict(getattr(gateway, "executors", {}) or {})
    cards = {c.id: c for c in service.catalog.cards()}
    served: dict[int, tuple[MCPExecutor, int]] = {}
    for tool_id, executor in bound.items():
        if not isinstance(executor, MCPExecutor):
            continue
        card = cards.get(tool_id)
        seen = card is not None and sees_tool(viewer, level, card)
        old = served.get(id(executor), (executor, 0))
        served[id(executor)] = (executor, old[1] + int(seen))
    out = []
    for executor, count in served.values():
        if count == 0 and level is not Level.PLATFORM:
            continue  # serves none of this administrator's tools
        wait = executor.backing_off
        state = f"reconnecting in {wait:.0f}s" if wait > 0 else "no failure seen"
        out.append(Upstream(executor.label, state, count))
    return sorted(out, key=lambda u: u.label)


def visible_specs(service: Any, viewer: Principal, level: Level) -> list[ToolSpec]:
    return [s for s in service.catalog.specs() if sees_tool(viewer, level, s.card)]


def page(
    service: Any,
    viewer: Principal,
    level: Level,
    filters: Filters,
    number: int,
    overlap: OverlapCache,
    *,
    measure: bool,
) -> dict[str, Any]:
    from toolscout.imports import import_warnings
    from toolscout.lint.overlap import collides
    from toolscout.lint.run import static_findings
    from toolscout.lint.source import from_specs

    specs = visible_specs(service, viewer, level)
    chosen = [s for s in specs if filters.keep(s)]
    pages = max((len(chosen) + PAGE - 1) // PAGE, 1)
    number = min(max(number, 1), pages)
    window = chosen[(number - 1) * PAGE : number * PAGE]
    policy = service.catalog.policy
    findings: dict[str, list[Finding]] = defaultdict(list)
    for f in static_findings(from_specs(window).tools, admin_scope=policy.admin_scope):
        for tool in f.tools:
            findings[tool].append(f)
    warned: dict[str, list[str]] = defaultdict(list)
    for w in import_warnings(window):
        warned[w.tool_id].append(w.message)
    rows = [
        Row(
            s,
            shown_tenants(viewer, level, s.card),
            json.dumps(s.parameters, indent=2, ensure_ascii=False),
            tuple(findings.get(s.id, ())),
            tuple(warned.get(s.id, ())),
        )
        for s in window
    ]
    pairs = overlap.get(service, specs, measure=measure)
    colliding = [p for p in pairs or [] if collides(p)]
    # none past lint's threshold: the closest pairs still show where the catalog is crowded
    closest = sorted(pairs or [], key=lambda p: -p.rate)[:CLOSEST]
    shown_pairs = colliding or closest
    cards = [s.card for s in specs]
    return {
        "rows": rows,
        "total": len(specs),
        "matched": len(chosen),
        "page": number,
        "pages": pages,
        "filters": filters,
        "choices": {
            "source": sorted({c.source for c in cards if c.source}),
            "group": sorted({c.group for c in cards if c.group}),
            "risk": sorted({c.risk.value for c in cards}),
            "scope": sorted({s for c in cards for s in c.scopes}),
            "tenant": sorted(
                {
                    t
                    for c in cards
                    for t in c.tenants
                    if level is Level.PLATFORM or t == viewer.tenant
                }
            ),
        },
        "upstreams": upstreams(service, viewer, level),
        "pairs": shown_pairs if pairs is not None else None,
        "colliding": bool(colliding),
    }


__all__ = ["Filters", "OverlapCache", "Row", "Upstream", "page", "upstreams", "visible_specs"]
