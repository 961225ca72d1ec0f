"""Discovery health: the discovery log over time and the false-negative report
(:func:`toolscout.telemetry.report.report_for`), as one administrator may read them.

A platform administrator reads everything. A tenant administrator reads its tenant's
discoveries, the misses of the tools offered to exactly its tenant, and the alias
suggestions drawn from its tenant's queries: never another tenant's query text.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from toolscout.console import svg
from toolscout.console.access import Level, owns_tool, sees_tenant, sees_tool
from toolscout.policy import Principal
from toolscout.telemetry.report import AliasSuggestion, ToolMisses

PAGE = 25
PERIODS = {"1d": 86400.0, "7d": 7 * 86400.0, "30d": 30 * 86400.0}


@dataclass(frozen=True, slots=True)
class Suggestion:
    item: AliasSuggestion
    may_accept: bool


def _buckets(rows: list[Any], since: float, until: float) -> list[tuple[str, float, float]]:
    span = until - since
    width = 3600.0 if span <= 2 * 86400 else 86400.0
    fmt = "%H:00" if width == 3600.0 else "%m-%d"
    n = max(int(span // width) + 1, 1)
    start = until - n * width
    totals = [0.0] * n
    low = [0.0] * n
    for r in rows:
        i = min(max(int((r.ts - start) // width), 0), n - 1)
        totals[i] += 1
        if r.low or not r.shown:
            low[i] += 1
    return [
        (datetime.fromtimestamp(start + (i + 1) * width).strftime(fmt), totals[i], low[i])
        for i in range(n)
    ]


def page(service: Any, viewer: Principal, level: Level, period: str, number: int) -> dict[str, Any]:
    from toolscout.telemetry.report import report_for

    catalog = service.catalog
    seconds = PERIODS.get(period, PERIODS["7d"])
    now = time.time()
    since = now - seconds
    if catalog.log is None:
        return {"log": False}
    rows = [
        d for d in catalog.log.discoveries(since, now + 1) if sees_tenant(viewer, level, d.tenant)
    ]
    report = report_for(catalog, since=since)
    cards = {c.id: c for c in catalog.cards()}

    def mine(tool_id: str) -> bool:
        card = cards.get(tool_id)
        if card is None:
            return False
        return level is Level.PLATFORM or owns_tool(viewer, catalog.policy, card.tenants)

    tools: list[ToolMisses] = [t for t in report.tools if mine(t.tool_id)]
    suggestions = [
        Suggestion(s, owns_tool(viewer, catalog.policy, cards[s.tool_id].tenants))
        for s in report.suggestions
        if s.tool_id in cards
        and sees_tool(viewer, level, cards[s.tool_id])
        and sees_tenant(viewer, level, s.tenant)
    ]
    pages = max((len(tools) + PAGE - 1) // PAGE, 1)
    number = min(max(number, 1), pages)
    low = [d for d in rows if d.low or not d.shown]
    low.sort(key=lambda d: -d.ts)
    check = report.confidence
    reliability = (
        svg.reliability(
            [(b.mean_confidence, b.right_first, b.discoveries) for b in check.bands],
            "Reported confidence against how often the first tool was right",
        )
        if check is not None and check.bands
        else None
    )
    return {
        "log": True,
        "period": period if period in PERIODS else "7d",
        "periods": list(PERIODS),
        "discoveries": len(rows),
        "low_count": len(low),
        "empty": sum(1 for d in rows if not d.shown),
        "timeline": svg.bars(
            _buckets(rows, since, now), "Discoveries over time (dark: low confidence or empty)"
        ),
        "tools": tools[(number - 1) * PAGE : number * PAGE],
        "page": number,
        "pages": pages,
        "suggestions": suggestions[:50],
        "low": low[:50],
        "confidence": check,
        "reliability": reliability,
        "notes": report.notes,
        "platform": level is Level.PLATFORM,
    }


__all__ = ["PERIODS", "Suggestion", "page"]
