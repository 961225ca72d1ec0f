"""The evaluation harness: any ``tools.jsonl`` + ``queries.jsonl``, every strategy side by side.

:func:`run` indexes the tools (into a throw-away store unless ``db`` is given),
sends every query through :meth:`Catalog.discover` — the product's own path,
with an all-scopes principal, ``k=10``, the progressive tier — once per
strategy, and scores the ranked ids with :mod:`toolscout.evaluate.metrics`. A strategy
is a :class:`SearchSettings` (see :data:`STRATEGIES`); ``naive`` is the keyword
counter of :mod:`toolscout.evaluate.naive`. The warm run measures usage-learned aliases
on a held-out half of the queries (:func:`toolscout.evaluate.evalset.split_history`):
nothing of that half ever reaches the index.

Token figures are sums of per-tool schema tokens (``openai`` format), the
same way the catalog counts its own total. The report dict is shown as a table by
:mod:`toolscout.evaluate.table`.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence, Set
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toolscout.discovery import inject
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.search import clear_query_cache
from toolscout.discovery.shortlist import Trace
from toolscout.embed.base import Embedder
from toolscout.errors import ConfigError, QueryError, QueryFileError
from toolscout.evaluate.evalset import (
    WARM_SEED,
    EvalQuery,
    read_queries,
    read_tools,
    sample,
    split_history,
)
from toolscout.evaluate.metrics import (
    complete_at,
    latency_summary,
    mean_scores,
    peak_rss_mb,
    recall_at,
    reliability,
    score_query,
)
from toolscout.evaluate.naive import naive_discover
from toolscout.policy import Principal
from toolscout.settings import SearchSettings
from toolscout.stores.sqlite import LearnedAliases

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)
#: the shortlist depth asked of discover; every @k is computed from it
DEPTH = 10
#: a query fails when a gold tool is not among the first FAILURE_K (the injected shortlist)
FAILURE_K = 5
TOKEN_FORMAT = "openai"

ProgressFn = Callable[[str, int, int], None]

_PLAIN = SearchSettings(
    fusion="weighted",
    reformulate=False,
    exact_hits=False,
    dedupe=False,
    learned_aliases=False,
    multi_intent=False,
    prerequisites=False,
)
_HYBRID = SearchSettings()
#: name → settings; ``None`` is the naive keyword baseline
STRATEGIES: dict[str, SearchSettings | None] = {
    "naive": None,
    "bm25": _PLAIN.but(dense=False),
    "dense": _PLAIN.but(lexical=False),
    "hybrid-rrf": _PLAIN.but(fusion="rrf", adaptive_fusion=False),
    "hybrid-fixed": _PLAIN.but(adaptive_fusion=False),
    "hybrid": _HYBRID,
    "hybrid-weighted": _HYBRID.but(fusion="weighted"),
    "hybrid-intents": _HYBRID.but(multi_intent=True),
    "hybrid-no-exact": _HYBRID.but(exact_hits=False),
    "hybrid-no-reformulate": _HYBRID.but(reformulate=False),
    "hybrid-no-dedupe": _HYBRID.but(dedupe=False),
    "hybrid-no-prerequisites": _HYBRID.but(prerequisites=False),
}
DEFAULT_STRATEGIES: tuple[str, ...] = ("naive", "bm25", "dense", "hybrid")
#: reported by the warm run: product default before and after learning from the history half
WARM_STRATEGIES: tuple[str, ...] = ("hybrid-cold", "hybrid-warm")
#: stages a gold tool can be lost at (see :func:`lost_at`)
STAGES: tuple[str, ...] = ("policy", "retrieval", "fusion", "selection", "ranking")


def resolve_strategies(names: Iterable[str]) -> tuple[list[str], bool]:
    """Registered strategy names to run, and whether the warm run was asked for.

    ``all`` is every registered strategy; ``hybrid-cold`` / ``hybrid-warm`` ask for the warm run.
    """
    out: list[str] = []
    warm = False
    for name in names:
        picked = list(STRATEGIES) if name == "all" else [name]
        for n in picked:
            if n in WARM_STRATEGIES:
                warm = True
            elif n not in STRATEGIES:
                known = ", ".join([*STRATEGIES, *WARM_STRATEGIES, "all"])
                raise ConfigError(f"unknown strategy {n!r}; expected one of: {known}")
            elif n not in out:
                out.append(n)
    return out, warm


def parse_ks(text: str | Sequence[int]) -> tuple[int, ...]:
    """``"1,3,5,10"`` (or a sequence) → sorted distinct ks within 1..DEPTH."""
    try:
        ks = [int(x) for x in text.split(",") if x.strip()] if isinstance(text, str) else list(text)
    except ValueError:
        raise ConfigError(f"k must be a comma-separated list of integers, got {text!r}") from None
    if not ks or any(not 1 <= k <= DEPTH for k in ks):
        raise ConfigError(f"each k must be between 1 and {DEPTH}, got {text!r}")
    return tuple(sorted(set(ks)))


# -- one strategy -----------------------------------------------------------------------
def eval_principal(catalog: Catalog) -> Principal:
    """Every scope, admin included: the evaluation measures search, not policy."""
    return Principal.of("eval", scopes=["*", catalog.policy.admin_scope])


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one strategy returned for one query, and what stage analysis needs."""

    ranked: tuple[str, ...]
    ms: float
    low_confidence: bool | None = None  # None: the strategy has no notion of confidence
    trace: Trace | None = None  # None for naive
    matched: frozenset[str] = frozenset()  # naive: every id that scored above zero
    confidence: float | None = None


def discover_once(
    catalog: Catalog, settings: SearchSettings | None, query: str, principal: Principal
) -> Outcome:
    """One query through one strategy, timed around the whole call."""
    start = time.perf_counter()
    if settings is None:
        scored = naive_discover(catalog, query, principal, k=None)
        ms = (time.perf_counter() - start) * 1000
        ranked = tuple(t for t, _ in scored[:DEPTH])
        return Outcome(ranked, ms, matched=frozenset(t for t, _ in scored))
    shortlist = catalog.discover(query, principal, k=DEPTH, settings=settings, tier="progressive")
    ms = (time.perf_counter() - start) * 1000
    return Outcome(
        tuple(shortlist.ids),
        ms,
        shortlist.low_confidence,
        shortlist.trace,
        confidence=shortlist.confidence,
    )


def discover_and_score(
    catalog: Catalog,
    settings: SearchSettings | None,
    query: str,
    gold: Collection[str],
    principal: Principal,
    row: Mapping[str, list[float]],
) -> Outcome:
    """:func:`discover_once` (a refused query: nothing found), its recall@5, complete@5,
    confidence shown (-1: none) and whether the first tool was gold appended to ``row``'s
    ``recall``, ``complete``, ``confidence`` and ``right`` lists; the outcome returned."""
    try:
        out = discover_once(catalog, settings, query, principal)
    except QueryError:
        out = Outcome((), 0.0)
    row["recall"].append(recall_at(out.ranked, gold, 5))
    row["complete"].append(complete_at(out.ranked, gold))
    row["confidence"].append(-1.0 if out.confidence is None else out.confidence)
    row["right"].append(float(bool(out.ranked) and out.ranked[0] in gold))
    return out


def lost_at(gold_id: str, outcome: Outcome, entitled: Set[str], k: int = FAILURE_K) -> str | None:
    """The pipeline stage that lost ``gold_id`` from the top ``k``; None when it is there.

    policy: not entitled; retrieval: in neither retriever's top pool (naive: scored zero);
    fusion: in a pool, not in the fused top k; selection: in the fused top k, not in the
    shortlist; ranking (naive only): scored, but not in the top k.
    """
    if gold_id in outcome.ranked[:k]:
        return None
    if gold_id not in entitled:
        return "policy"
    trace = outcome.trace
    if trace is None:
        return "ranking" if gold_id in outcome.matched else "retrieval"
    if gold_id in trace.fused[:k]:
        return "selection"
    if gold_id in trace.lexical or gold_id in trace.dense:
        return "fusion"
    return "retrieval"


@dataclass(slots=True)
class StrategyResult:
    name: str
    metrics: dict[str, Any] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)


class ToolTokens:
    """Per-tool schema tokens, counted once per tool."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._cache: dict[str, int] = {}

    def __call__(self, tool_id: str) -> int:
        n = self._cache.get(tool_id)
        if n is None:
            spec = self.catalog.get(tool_id)
            n = self._cache[tool_id] = inject.schema_tokens([spec], TOKEN_FORMAT)
        return n

    def total(self, ids: Iterable[str]) -> int:
        return sum(self(t) for t in ids)


def evaluate_strategy(
    catalog: Catalog,
    name: str,
    settings: SearchSettings | None,
    queries: Sequence[EvalQuery],
    *,
    ks: Sequence[int] = DEFAULT_KS,
    failures: int = 0,
    tokens: ToolTokens | None = None,
    progress: ProgressFn | None = None,
) -> StrategyResult:
    """Run ``queries`` through one strategy and average the metrics (gold must be in catalog)."""
    principal = eval_principal(catalog)
    entitled = catalog.entitle(principal).ids
    tokens = tokens or ToolTokens(catalog)
    clear_query_cache()  # each strategy pays for its own query embeddings
    rows: list[dict[str, float]] = []
    confidences: list[tuple[float, bool]] = []
    ms: list[float] = []
    low = injected = errors = 0
    lost: Counter[str] = Counter()
    result = StrategyResult(name)
    for i, q in enumerate(queries):
        try:
            out = discover_once(catalog, settings, q.query, principal)
            ms.append(out.ms)
        except QueryError:  # e.g. longer than the product accepts: scored as nothing found
            out = Outcome((), 0.0)
            errors += 1
        rows.append(score_query(out.ranked, q.gold, ks))
        low += bool(out.low_confidence)
        if out.confidence is not None:
            confidences.append((out.confidence, bool(out.ranked) and out.ranked[0] in q.gold))
        injected += tokens.total(out.ranked[:FAILURE_K])
        stages = {g: s for g in q.gold if (s := lost_at(g, out, entitled)) is not None}
        lost.update(stages.values())
        if stages and len(result.failures) < failures:
            result.failures.append(_failure(name, q, out, stages))
        if progress is not None:
            progress(name, i + 1, len(queries))
    n = max(len(queries), 1)
    result.metrics = {
        "n_queries": len(queries),
        **{key: round(v, 4) for key, v in mean_scores(rows).items()},
        "low_confidence_rate": None if settings is None else round(low / n, 4),
        "latency_ms": latency_summary(ms),
        "tokens": {"catalog": tokens.total(entitled), "injected@5": round(injected / n, 1)},
        "peak_rss_mb": peak_rss_mb(),
        "lost_at": {s: lost[s] for s in STAGES if lost[s]},
        "query_errors": errors,
        "reliability": reliability(confidences) if settings is not None else None,
    }
    return result


def _failure(name: str, q: EvalQuery, out: Outcome, stages: Mapping[str, str]) -> dict[str, Any]:
    return {
        "strategy": name,
        "id": q.id,
        "query": q.query,
        "gold": list(q.gold),
        "returned": list(out.ranked[:FAILURE_K]),
        "lost_at": dict(stages),
    }


# -- warm: learned aliases on held-out queries -------------------------------------------
def run_warm(
    catalog: Catalog,
    queries: Sequence[EvalQuery],
    workdir: Path,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    failures: int = 0,
    tokens: ToolTokens | None = None,
    progress: ProgressFn | None = None,
) -> tuple[list[StrategyResult], dict[str, Any]]:
    """hybrid-cold and hybrid-warm on the test half, over a copy of ``catalog``'s store."""
    history, test = split_history(queries)
    path = workdir / "warm.db"
    catalog.snapshot(path)
    with Catalog.open(path, embedder=catalog.embedder, log=False) as fresh:
        learned = LearnedAliases(fresh.store)
        if learned.of(1):  # a --db that has learned from real use is not cold
            learned.clear()
            fresh.learn(from_log=False)
        cold = evaluate_strategy(
            fresh, "hybrid-cold", _HYBRID, test,
            ks=ks, failures=failures, tokens=tokens, progress=progress,
        )  # fmt: skip
        start = time.perf_counter()
        for q in history:
            for gold in q.gold:
                fresh.record_usage(q.query, gold)
        fresh.learn(from_log=False)
        seconds = time.perf_counter() - start
        warm = evaluate_strategy(
            fresh, "hybrid-warm", _HYBRID, test,
            ks=ks, failures=failures, tokens=tokens, progress=progress,
        )  # fmt: skip
    info = {
        "seed": WARM_SEED,
        "history": len(history),
        "test": len(test),
        "dropped_overlap": len(queries) - len(test) - len(history),
        "learn_seconds": round(seconds, 3),
    }
    return [cold, warm], info


# -- the whole run ------------------------------------------------------------------------
def _scorable(
    catalog: Catalog, queries: Sequence[EvalQuery], renamed: Mapping[str, str]
) -> tuple[list[EvalQuery], list[dict[str, Any]]]:
    """Queries with gold ids mapped through renames and cut to those in the catalog."""
    kept: list[EvalQuery] = []
    missing: list[dict[str, Any]] = []
    for q in queries:
        gold = tuple(renamed.get(g, g) for g in q.gold)
        present = tuple(g for g in gold if catalog.spec(g) is not None)
        if len(present) < len(gold):
            missing.append({"id": q.id, "missing": [g for g in gold if g not in present]})
        if present:
            kept.append(replace(q, gold=present))
    return kept, missing


def run(
    tools: str | Path,
    queries: str | Path,
    *,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    ks: str | Sequence[int] = DEFAULT_KS,
    db: str | Path | None = None,
    warm: bool = False,
    failures: int = 0,
    limit: int | None = None,
    embedder: Embedder | None = None,
    progress: ProgressFn | None = None,
    extra: Mapping[str, SearchSettings] | None = None,
) -> dict[str, Any]:
    """Index ``tools``, run ``queries`` through every strategy, and return the report dict.

    Queries whose gold ids are all missing from the catalog are not scored; they
    and partly-missing ones are listed under ``missing_gold``; when no query is left,
    :class:`QueryFileError` says so. ``extra`` adds named strategies (e.g. the held-out
    ranker of ``benchmarks/quality.py``).
    """
    names, warm_asked = resolve_strategies(strategies)
    cuts = parse_ks(ks)
    specs, renamed = read_tools(tools)
    asked = sample(read_queries(queries), limit)
    report: dict[str, Any] = {"tools": str(tools), "queries": str(queries), "n_tools": len(specs)}
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="toolscout-eval-")))
        catalog = Catalog.open(db or workdir / "eval.db", embedder=embedder, log=False)
        stack.callback(catalog.close)
        cb = (lambda done, total: progress("index", done, total)) if progress else None
        start = time.perf_counter()
        catalog.embedder.embed(["load the model before the clock starts"])
        loaded = time.perf_counter()
        stats = catalog.add(specs, progress=cb, replace_all=True).stats
        seconds = time.perf_counter() - loaded
        scored, missing = _scorable(catalog, asked, renamed)
        if not scored:
            raise QueryFileError(
                str(queries),
                f"none of the {len(asked)} queries has a gold tool id that is in {tools}"
                f" (first missing: {missing[0]['missing'][0]!r})",
            )
        report.update(
            n_queries=len(asked),
            n_scored=len(scored),
            index={
                "seconds": round(seconds, 3),
                "tools_per_s": round(len(specs) / max(seconds, 1e-9), 1),
                "embedded": stats.embedded,
                "model_load_seconds": round(loaded - start, 3),
            },
            k=list(cuts),
            calibration=catalog_calibration(catalog),
        )
        tokens = ToolTokens(catalog)
        plan = [(name, STRATEGIES[name]) for name in names] + list((extra or {}).items())
        results = [
            evaluate_strategy(
                catalog, name, settings, scored,
                ks=cuts, failures=failures, tokens=tokens, progress=progress,
            )
            for name, settings in plan
        ]  # fmt: skip
        if warm or warm_asked:
            warm_results, report["warm"] = run_warm(
                catalog, scored, workdir,
                ks=cuts, failures=failures, tokens=tokens, progress=progress,
            )  # fmt: skip
            results += warm_results
    report["strategies"] = {r.name: r.metrics for r in results}
    report["failures"] = [f for r in results for f in r.failures]
    report["missing_gold"] = {"count": len(missing), "queries": missing}
    report["renamed_ids"] = renamed
    return report


def catalog_calibration(catalog: Catalog) -> dict[str, Any] | None:
    """The catalog's stored ranker calibration, as the report shows it."""
    from toolscout.discovery.calibrate import Calibration
    from toolscout.discovery.search import CALIBRATION_META

    raw = catalog.store.meta(CALIBRATION_META)
    cal = Calibration.from_json(raw) if raw else None
    if cal is None:
        return None
    return {
        "summary": cal.describe(),
        "lean": cal.lean(),
        "pseudo_queries": cal.n_pseudo,
        "seconds": cal.seconds,
        "pseudo_recall@5": cal.pseudo_recall,
    }
