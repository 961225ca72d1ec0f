"""The playground: one request for one or two principals, explained in words.

Discovery is ``Toolscout.discover``; what policy hid is ``Catalog.decide`` (the one
policy function) per tool, ranked for this request with discovery's own retrieval
stage over the hidden tools — nothing here ranks or decides by itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolscout.console.access import Level, sees_tool
from toolscout.discovery.inject import Tier
from toolscout.discovery.shortlist import ScoredTool, Shortlist
from toolscout.policy import Entitlement, Principal

#: hidden tools listed per principal, most relevant to the request first
HIDDEN_SHOWN = 8


@dataclass(frozen=True, slots=True)
class Shown:
    rank: int
    tool: ScoredTool
    signals: tuple[str, ...]
    why: str


@dataclass(frozen=True, slots=True)
class Hidden:
    tool_id: str
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class Run:
    """One principal's answer to the request, ready to render."""

    who: str
    principal: Principal
    shortlist: Shortlist
    shown: tuple[Shown, ...]
    schemas: str
    verdict: str
    entitled: int
    #: for administrators only (None otherwise): what policy hid and why
    hidden: tuple[Hidden, ...] | None = None
    hidden_counts: dict[str, int] = field(default_factory=dict)
    hidden_total: int = 0


def describe(principal: Principal) -> str:
    roles = ", ".join(sorted(principal.roles)) or "no roles"
    scopes = f"; scopes {', '.join(sorted(principal.scopes))}" if principal.scopes else ""
    return f"{principal.subject} · tenant {principal.tenant or '-'} · {roles}{scopes}"


def _learned(service: Any, tool_id: str, query: str) -> bool:
    """Did an alias accepted from the usage report name this tool in the request?"""
    log = service.catalog.log
    if log is None:
        return False
    text = " ".join(query.split()).casefold()
    return any(
        a["tool_id"] == tool_id and " ".join(str(a["alias"]).split()).casefold() in text
        for a in log.accepted()
    )


def explain(service: Any, shortlist: Shortlist) -> tuple[Shown, ...]:
    out = []
    for i, t in enumerate(shortlist.tools, 1):
        signals = [f"lexical {t.lexical:.2f}", f"dense {t.dense:.2f}"]
        if shortlist.tier is Tier.ALL:
            why = "every entitled tool is shown: the caller may use fewer than 10"
        elif t.needed_by:
            why = f"added because it finds an identifier that {t.needed_by} needs"
            signals.append(f"needed by {t.needed_by}")
        elif t.exact == "alias" and _learned(service, t.id, shortlist.query):
            why = "the request uses an alias learned from usage (accepted from the report)"
            signals.append("learned alias")
        elif t.exact:
            why = f"the request names it (exact {t.exact} hit): always kept"
            signals.append(f"exact {t.exact}")
        else:
            why = f"ranked #{i} by the fused score of its lexical and dense matches"
        out.append(Shown(i, t, tuple(signals), why))
    return tuple(out)


def verdict(shortlist: Shortlist) -> str:
    if not shortlist.tools:
        return "Abstained: nothing this caller may use fits the request."
    if shortlist.low_confidence:
        return (
            f"Low confidence ({shortlist.confidence:.0%}): the first tool may be wrong; "
            "an agent should ask or search again."
        )
    return f"Confidence {shortlist.confidence:.0%} that the first tool is the right one."


def hidden_for(
    service: Any, viewer: Principal, level: Level, principal: Principal, query: str
) -> tuple[tuple[Hidden, ...], dict[str, int], int]:
    """The tools the viewer administers that policy refuses ``principal``, and why:
    the most relevant to ``query`` first (discovery's retrieval over them), with counts."""
    from toolscout.discovery.pipeline import retrieve_or_skip
    from toolscout.discovery.search import parse_query

    catalog = service.catalog
    denied = {}
    counts: dict[str, int] = {}
    for card in catalog.cards():
        if not sees_tool(viewer, level, card):
            continue
        decision = catalog.decide(principal, card.id)
        if not decision.allowed:
            denied[card.id] = (card, decision)
            key = decision.reason.value if decision.reason else "refused"
            counts[key] = counts.get(key, 0) + 1
    if not denied:
        return (), counts, 0
    cards = tuple(c for c, _ in denied.values())
    ent = Entitlement(cards, {}, frozenset(denied), {c.id: c for c in cards})
    df, n_docs = catalog.store.document_frequency()
    parsed = parse_query(query, df, n_docs, catalog.settings)
    ranked = [c.id for c in retrieve_or_skip(catalog, parsed, ent, catalog.settings)[0].candidates]
    order = [t for t in ranked if t in denied][:HIDDEN_SHOWN]
    hidden = []
    for tool_id in order:
        _, d = denied[tool_id]
        hidden.append(Hidden(tool_id, d.reason.value if d.reason else "refused", d.detail))
    return tuple(hidden), counts, len(denied)


def run(
    service: Any,
    viewer: Principal,
    level: Level,
    principal: Principal,
    who: str,
    query: str,
    *,
    k: int,
    fmt: str,
) -> Run:
    shortlist = service.discover(principal, query, k=k, fmt=fmt)
    hidden = None
    counts: dict[str, int] = {}
    total = 0
    if level is not Level.NONE:
        hidden, counts, total = hidden_for(service, viewer, level, principal, query)
    return Run(
        who=who,
        principal=principal,
        shortlist=shortlist,
        shown=explain(service, shortlist),
        schemas=json.dumps(list(shortlist.schemas), indent=2, ensure_ascii=False),
        verdict=verdict(shortlist),
        entitled=len(service.entitled(principal)),
        hidden=hidden,
        hidden_counts=counts,
        hidden_total=total,
    )


__all__ = ["Hidden", "Run", "Shown", "describe", "explain", "hidden_for", "run", "verdict"]
