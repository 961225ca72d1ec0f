"""Ranking and systems metrics for the evaluation harness: plain functions over ids and numbers.

Per query, from the ranked ids a strategy returned and the query's gold ids:

- ``recall@k``   = |gold ∩ top-k| / |gold|
- ``complete@5`` = 1 if every gold id is in the top 5, else 0
- ``ndcg@10``    = DCG@10 / IDCG, binary gains, DCG = Σ rel_i / log2(i + 1) over ranks
  i = 1..10, IDCG over min(|gold|, 10) relevant ranks
- ``mrr@10``     = 1 / rank of the first gold id within the top 10, else 0

then averaged over queries (:func:`mean_scores`). Latency percentiles use the
nearest-rank method (:func:`percentile`).
"""

from __future__ import annotations

import math
import resource
import sys
from collections.abc import Collection, Mapping, Sequence
from typing import Any

#: the k of the fixed-depth metrics
COMPLETE_K = 5
NDCG_K = 10
MRR_K = 10


def recall_at(ranked: Sequence[str], gold: Collection[str], k: int) -> float:
    if not gold:
        return 0.0
    return len(set(ranked[:k]) & set(gold)) / len(set(gold))


def complete_at(ranked: Sequence[str], gold: Collection[str], k: int = COMPLETE_K) -> float:
    return 1.0 if gold and set(gold) <= set(ranked[:k]) else 0.0


def ndcg_at(ranked: Sequence[str], gold: Collection[str], k: int = NDCG_K) -> float:
    wanted = set(gold)
    if not wanted:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, tid in enumerate(ranked[:k]) if tid in wanted)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(wanted), k)))
    return dcg / ideal


def mrr_at(ranked: Sequence[str], gold: Collection[str], k: int = MRR_K) -> float:
    wanted = set(gold)
    for i, tid in enumerate(ranked[:k]):
        if tid in wanted:
            return 1.0 / (i + 1)
    return 0.0


def score_query(
    ranked: Sequence[str], gold: Collection[str], ks: Sequence[int]
) -> dict[str, float]:
    """Every ranking metric of one query, keyed as in the report (``recall@5``, ``ndcg@10``...)."""
    out = {f"recall@{k}": recall_at(ranked, gold, k) for k in ks}
    out[f"complete@{COMPLETE_K}"] = complete_at(ranked, gold)
    out[f"ndcg@{NDCG_K}"] = ndcg_at(ranked, gold)
    out[f"mrr@{MRR_K}"] = mrr_at(ranked, gold)
    return out


def mean_scores(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The per-key mean of per-query scores (keys of the first row; 0.0 for no rows)."""
    if not rows:
        return {}
    return {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]}


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile: the smallest value with at least ``p`` % of values at or below."""
    if not values:
        return 0.0
    if not 0 < p <= 100:
        raise ValueError(f"percentile must be within (0, 100], got {p}")
    ordered = sorted(values)
    rank = math.ceil(p / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def latency_summary(ms: Sequence[float]) -> dict[str, float]:
    return {f"p{p}": round(percentile(ms, p), 3) for p in (50, 95, 99)}


def peak_rss_mb() -> float:
    """The process's peak resident set size so far, in MB (never decreases)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB elsewhere
    return round(peak / scale, 1)


#: a confidence decile is judged only when it holds at least this share of the queries
RELIABILITY_MIN_SHARE = 0.05


def reliability(pairs: Sequence[tuple[float, bool]]) -> dict[str, Any]:
    """How well confidence predicts that the top tool is right, decile by decile.

    ``pairs`` are (confidence, top tool is a gold tool) per query. Each decile
    [0, 0.1), ..., [0.9, 1.0] reports its query count, mean confidence and share
    right; ``max_gap`` is the largest |confidence - share right| over the deciles
    holding at least :data:`RELIABILITY_MIN_SHARE` of the queries, ``ece`` the
    count-weighted mean gap over all deciles.
    """
    bins: list[list[tuple[float, bool]]] = [[] for _ in range(10)]
    for conf, right in pairs:
        bins[min(max(int(conf * 10), 0), 9)].append((conf, right))
    rows = []
    max_gap = ece = 0.0
    for i, cell in enumerate(bins):
        if not cell:
            continue
        mean = sum(c for c, _ in cell) / len(cell)
        acc = sum(1 for _, r in cell if r) / len(cell)
        gap = abs(mean - acc)
        ece += gap * len(cell) / len(pairs)
        if len(cell) >= RELIABILITY_MIN_SHARE * len(pairs):
            max_gap = max(max_gap, gap)
        rows.append(
            {"decile": i, "n": len(cell), "confidence": round(mean, 3), "right": round(acc, 3)}
        )
    return {"deciles": rows, "max_gap": round(max_gap, 3), "ece": round(ece, 3)}
