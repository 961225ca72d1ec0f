"""The false-negative report: tools users needed that discovery did not show.

Read from the discovery log. Each execution (or explicit feedback) is linked to
the discovery before it — by its discovery id, or else by the latest discovery
of the same conversation — and counts as a **miss** when that discovery did not
show the tool. A conversation that searched again before the call is a
**second search**: the first query missed the tool even if the second found it.
From the queries that missed come **alias suggestions**, each with its evidence,
per tenant; accepting one writes it into the tool's card (``accept_alias``). A phrase
is suggested only on evidence from several discoveries (:data:`MIN_ALIAS_EVIDENCE`, not
one caller's single miss) and only when it is related to the tool: searched over the
tenant's tools, the phrase ranks the tool within its top :data:`RELATED_TOP` — so one
caller's "what time is it in Tokyo" followed by ``git_status`` is not an alias of it.

The same links (:mod:`toolscout.telemetry.links`) check the reported **confidence**
against what happened (:mod:`toolscout.telemetry.confidence`): the report carries that
check, and accepting its correction (``accept_confidence``) stores it with the catalog,
so every later discovery reports the corrected number.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolscout.discovery.calibrate import MAX_SHIFT
from toolscout.errors import ConfigError, UnknownToolError
from toolscout.telemetry.confidence import MIN_OUTCOMES, ConfidenceCheck, confidence_check
from toolscout.telemetry.links import link_needs
from toolscout.telemetry.log import DiscoveryLog, DiscoveryRow, normalise_query

if TYPE_CHECKING:
    from toolscout.discovery.calibrate import ConfidenceShift
    from toolscout.discovery.catalog import Catalog

#: the longest query text suggested as an alias, in characters
ALIAS_MAX_CHARS = 200
#: missed discoveries with one phrasing needed (by default) before it is suggested
MIN_ALIAS_EVIDENCE = 2
#: a suggested phrase must rank its tool within this many of the tenant's tools
RELATED_TOP = 20

#: (tenant, tool id, phrase) -> the tool's rank (1 = first) when the phrase is searched
#: over the tenant's tools, or None when it is not among the candidates at all
Ranker = Callable[[str, str, str], "int | None"]


@dataclass(frozen=True, slots=True)
class MissedQuery:
    """A query after which the tool was needed but not shown (text only if it is kept)."""

    query: str | None
    query_hash: str | None
    times: int
    shown_instead: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "query_hash": self.query_hash,
            "times": self.times,
            "shown_instead": list(self.shown_instead),
        }


@dataclass(frozen=True, slots=True)
class ToolMisses:
    """One tool's record in the period."""

    tool_id: str
    needed: int  # executions and feedback linked to a discovery
    misses: int  # of those, the discovery did not show the tool
    second_searches: int  # the conversation searched again before the call
    feedback: int  # explicit feedback naming the tool
    shown: int  # discoveries that showed it
    queries: tuple[MissedQuery, ...] = ()

    @property
    def miss_rate(self) -> float:
        return self.misses / self.needed if self.needed else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool_id": self.tool_id,
            "needed": self.needed,
            "misses": self.misses,
            "miss_rate": round(self.miss_rate, 4),
            "second_searches": self.second_searches,
            "feedback": self.feedback,
            "shown": self.shown,
            "missed_queries": [q.to_dict() for q in self.queries],
        }


@dataclass(frozen=True, slots=True)
class AliasSuggestion:
    """A phrase users used for a tool that search did not show them, with the evidence."""

    id: str
    tool_id: str
    alias: str
    tenant: str
    times: int  # misses (and first queries of second searches) with this phrasing
    subjects: int  # distinct callers who used it
    discovery_ids: tuple[str, ...]  # a few of them, to look up
    shown_instead: tuple[str, ...]
    #: the tool's rank when the phrase is searched over the tenant's tools (None: unchecked)
    rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tool_id": self.tool_id,
            "alias": self.alias,
            "tenant": self.tenant,
            "evidence": {
                "times": self.times,
                "subjects": self.subjects,
                "discovery_ids": list(self.discovery_ids),
                "shown_instead": list(self.shown_instead),
                "rank": self.rank,
            },
        }


@dataclass(frozen=True, slots=True)
class FalseNegativeReport:
    since: float
    until: float
    query_log: str
    discoveries: int
    needed: int
    misses: int
    low_confidence: int  # discoveries flagged low-confidence or that showed nothing
    zero_results: int
    tools: tuple[ToolMisses, ...]
    never_surfaced: tuple[str, ...]
    suggestions: tuple[AliasSuggestion, ...]
    low_confidence_queries: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    confidence: ConfidenceCheck | None = None

    @property
    def miss_rate(self) -> float:
        return self.misses / self.needed if self.needed else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "since": self.since,
            "until": self.until,
            "query_log": self.query_log,
            "discoveries": self.discoveries,
            "needed": self.needed,
            "misses": self.misses,
            "miss_rate": round(self.miss_rate, 4),
            "low_confidence": self.low_confidence,
            "zero_results": self.zero_results,
            "low_confidence_queries": list(self.low_confidence_queries),
            "tools": [t.to_dict() for t in self.tools],
            "never_surfaced": list(self.never_surfaced),
            "suggestions": [s.to_dict() for s in self.suggestions],
            "notes": list(self.notes),
            "confidence": self.confidence.to_dict() if self.confidence else None,
        }


def parse_age(text: str) -> float:
    """Seconds in an age such as ``7d``, ``12h``, ``30m``, ``2w`` or ``90s`` (bare: days)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    raw = text.strip().lower()
    unit = raw[-1:] if raw[-1:] in units else "d"
    number = raw[:-1] if raw[-1:] in units else raw
    try:
        value = float(number)
    except ValueError:
        raise ConfigError(f"{text!r} is not an age like 7d, 12h, 30m or 2w") from None
    if not value >= 0 or value == float("inf"):
        raise ConfigError(f"{text!r} is not an age like 7d, 12h, 30m or 2w")
    return value * units[unit]


def alias_id(tenant: str, tool_id: str, alias: str) -> str:
    """A stable id for one suggestion: the same evidence gives the same id on every run."""
    return hashlib.sha256(f"{tenant}\x1f{tool_id}\x1f{alias}".encode()).hexdigest()[:12]


def build_report(
    log: DiscoveryLog,
    catalog_ids: Iterable[str],
    *,
    since: float = 0.0,
    until: float | None = None,
    tool: str | None = None,
    aliases: dict[str, Sequence[str]] | None = None,
    min_evidence: int = MIN_ALIAS_EVIDENCE,
    max_queries: int = 5,
    confidence_since: float = 0.0,
    rank: Ranker | None = None,
) -> FalseNegativeReport:
    """The report over ``[since, until)``; ``aliases`` (tool id -> existing aliases) keeps
    suggestions to phrases the card does not have yet; a phrase is suggested after
    ``min_evidence`` missed discoveries, and, given ``rank``, only when it ranks its tool
    within :data:`RELATED_TOP`; the confidence check reads only discoveries from
    ``confidence_since`` on (when the catalog's correction last moved)."""
    end = until if until is not None else time.time() + 1
    discoveries = log.discoveries(since, end)
    events = log.events(since, end)
    needs = link_needs(discoveries, events)
    ids = list(catalog_ids)
    shown: Counter[str] = Counter(t for d in discoveries for t in d.shown)
    needed: Counter[str] = Counter()
    missed: Counter[str] = Counter()
    second: Counter[str] = Counter()
    feedback: Counter[str] = Counter()
    queries: dict[str, dict[str, list[Any]]] = defaultdict(dict)
    phrases: dict[tuple[str, str, str], list[Any]] = {}
    for need in needs:
        e, d = need.event, need.discovery
        tid = e.tool_id
        needed[tid] += 1
        if e.kind == "feedback":
            feedback[tid] += 1
        missers: list[DiscoveryRow] = []
        if d is not None and tid not in d.shown:
            missed[tid] += 1
            missers.append(d)
        firsts = [x for x in need.earlier if x is not d and tid not in x.shown]
        if firsts and d is not None and tid in d.shown:
            second[tid] += 1
        missers += firsts
        for m in missers:
            key = m.query_hash or (normalise_query(m.query) if m.query else "")
            entry = queries[tid].setdefault(key, [m.query, m.query_hash, 0, m.shown])
            entry[2] += 1
            if m.query:
                text = " ".join(m.query.split())[:ALIAS_MAX_CHARS]
                pkey = (m.tenant, tid, normalise_query(text))
                p = phrases.setdefault(pkey, [text, 0, set(), [], m.shown])
                p[1] += 1
                p[2].add(m.subject)
                if len(p[3]) < 3:
                    p[3].append(m.id)
    tools = []
    for tid in set(needed):
        if tool is not None and tid != tool:
            continue
        qs = sorted(queries[tid].values(), key=lambda q: -q[2])[:max_queries]
        tools.append(
            ToolMisses(
                tid,
                needed[tid],
                missed[tid],
                second[tid],
                feedback[tid],
                shown[tid],
                tuple(MissedQuery(q[0], q[1], q[2], tuple(q[3])) for q in qs),
            )
        )
    # worst first by miss rate, smoothed so that one miss out of one call does not outrank
    # thirty out of forty: (misses + 0) / (needed + 2)
    tools.sort(key=lambda t: (-t.misses / (t.needed + 2), -t.misses, t.tool_id))
    have = {t: {normalise_query(a) for a in al} for t, al in (aliases or {}).items()}
    suggestions = []
    for (tenant, tid, norm), (text, n, subjects, dids, instead) in phrases.items():
        if (
            n < min_evidence
            or norm in have.get(tid, set())
            or (tool is not None and tid != tool)
            or (ids and tid not in ids)
        ):
            continue
        place = rank(tenant, tid, text) if rank is not None else None
        if rank is not None and (place is None or place > RELATED_TOP):
            continue  # the phrase is not about this tool: one caller's detour, not an alias
        suggestions.append(
            AliasSuggestion(
                alias_id(tenant, tid, norm),
                tid,
                text,
                tenant,
                n,
                len(subjects),
                tuple(dids),
                tuple(instead),
                place,
            )
        )
    suggestions.sort(key=lambda s: (-s.times, -s.subjects, s.tool_id, s.alias))
    low = [d for d in discoveries if d.low]
    # what the log kept is read from the rows (the writer's setting, not this reader's)
    kept = log.query_log
    if discoveries:
        kept = (
            "text"
            if any(d.query for d in discoveries)
            else "hash"
            if any(d.query_hash for d in discoveries)
            else "none"
        )
    notes = []
    if kept != "text":
        notes.append(
            f"query_log is {kept!r}: query text is not kept, so missed queries show "
            + ("as hashes" if kept == "hash" else "only as counts")
            + " and no alias can be suggested"
        )
    return FalseNegativeReport(
        since=since,
        until=end,
        query_log=kept,
        discoveries=len(discoveries),
        needed=sum(t.needed for t in tools),
        misses=sum(t.misses for t in tools),
        low_confidence=len(low),
        zero_results=sum(1 for d in discoveries if not d.shown),
        tools=tuple(tools),
        never_surfaced=tuple(t for t in ids if not shown[t] and (tool is None or t == tool)),
        suggestions=tuple(suggestions),
        low_confidence_queries=tuple(dict.fromkeys(d.query for d in low if d.query))[:10],
        notes=tuple(notes),
        confidence=confidence_check(needs, max(since, confidence_since)),
    )


def catalog_ranker(catalog: Catalog) -> Ranker:
    """:data:`Ranker` over ``catalog``: the phrase searched as discovery reads it (hybrid
    retrieval, or the dense path alone where discovery/coverage.py says so; the tenant's
    learned usage) over the tools the tenant has (its own and untenanted ones)."""
    from toolscout.discovery.search import parse_query
    from toolscout.errors import QueryError

    cards = [s.card for s in catalog.specs()]
    df, n_docs = catalog.store.document_frequency()

    def rank(tenant: str, tool_id: str, text: str) -> int | None:
        allowed = {c.id for c in cards if not c.tenants or tenant in c.tenants}
        try:
            query = parse_query(text, df, n_docs, catalog.settings)
        except QueryError:
            return None
        found = [c.id for c in catalog.retriever(tenant=tenant).run(query, allowed).candidates]
        return found.index(tool_id) + 1 if tool_id in found else None

    return rank


def report_for(
    catalog: Catalog,
    *,
    since: float = 0.0,
    tool: str | None = None,
    min_evidence: int = MIN_ALIAS_EVIDENCE,
) -> FalseNegativeReport:
    """The report for a catalog's own discovery log (suggestions checked for relatedness)."""
    if catalog.log is None:
        raise ConfigError("this catalog has no discovery log (it is in memory or logging is off)")
    if tool is not None and catalog.spec(tool) is None:
        raise UnknownToolError(tool)
    specs = catalog.specs()
    return build_report(
        catalog.log,
        [s.id for s in specs],
        since=since,
        tool=tool,
        aliases={s.id: s.card.aliases for s in specs},
        min_evidence=min_evidence,
        confidence_since=catalog.confidence_shift.ts,
        rank=catalog_ranker(catalog),
    )


@dataclass(frozen=True, slots=True)
class AcceptedAlias:
    suggestion: AliasSuggestion
    embedded: int  # texts embedded to index it (the new alias only)


def accept_alias(catalog: Catalog, suggestion_id: str) -> AcceptedAlias:
    """Write a suggested alias into its tool's card, re-embedding only the new alias.

    The acceptance is recorded in the discovery log with its source (the usage
    report) and evidence. Raises :class:`ConfigError` for an id that is not a
    current suggestion.
    """
    (done,) = accept_aliases(catalog, [suggestion_id])
    return done


def accept_aliases(catalog: Catalog, suggestion_ids: Sequence[str]) -> list[AcceptedAlias]:
    """:func:`accept_alias` for several suggestions, indexed in one transaction (any
    related suggestion, however little evidence it has: accepting is a person's choice)."""
    report = report_for(catalog, min_evidence=1)
    by_id = {s.id: s for s in report.suggestions}
    missing = [i for i in suggestion_ids if i not in by_id]
    if missing:
        raise ConfigError(
            f"no alias suggestion {missing[0]!r}; run `toolscout report` to list them"
        )
    chosen = [by_id[i] for i in dict.fromkeys(suggestion_ids)]
    per_tool: dict[str, list[str]] = defaultdict(list)
    for s in chosen:
        per_tool[s.tool_id].append(s.alias)
    result = catalog.add([catalog.get(t).with_aliases(a) for t, a in per_tool.items()])
    assert catalog.log is not None
    for s in chosen:
        catalog.log.record_accepted(s.id, s.tool_id, s.alias, s.tenant, s.to_dict()["evidence"])
    return [AcceptedAlias(s, result.stats.embedded) for s in chosen]


def accept_confidence(catalog: Catalog, *, since: float = 0.0) -> ConfidenceShift:
    """Store the confidence correction the log supports (added to the one in force).

    Raises :class:`ConfigError` when fewer than :data:`MIN_OUTCOMES` discoveries since
    ``since`` (and since the last correction) have an outcome."""
    check = report_for(catalog, since=since).confidence
    if check is None or check.shift is None:
        n = check.outcomes if check else 0
        raise ConfigError(
            f"{n} discoveries with an outcome (a call or feedback after them) since the last "
            f"correction; {MIN_OUTCOMES} are needed before the confidence is corrected"
        )
    old = catalog.confidence_shift
    total = min(max(old.shift + check.shift, -MAX_SHIFT), MAX_SHIFT)
    return catalog.set_confidence_shift(total, old.outcomes + check.outcomes)
