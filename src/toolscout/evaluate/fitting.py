"""Leave-one-set-out fitting of the ranker prior, the confidence scaling, the blend and the
dedupe yield.

The learned ranker (:mod:`toolscout.discovery.calibrate`) starts from prior
weights; the confidence goes through a Platt step. Both are constants chosen
on data, so they are fitted here on the queries of *other* evaluation sets and
scored on the one held out: :func:`examples` turns a set's queries into ranker
examples through the product's own retrieval, :func:`fit_prior` fits on every
set but one, :func:`fit_platt` scales confidence on the same sets. The blend of the
fixed fusion into the learned score and the dedupe yield are chosen on a grid
(:func:`recall_grid`) for the largest worst margin over the product's own parts
(:func:`best_part`) across the other sets, the larger mean margin on a tie
(:func:`choose_blend`): the goal is never to lose to a part on a catalog not seen.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

import numpy as np

from toolscout.discovery import pipeline
from toolscout.discovery.calibrate import (
    Example,
    FieldTerms,
    blended,
    features,
    fit,
    scores,
    top_probability,
)
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.search import parse_query
from toolscout.errors import QueryError
from toolscout.evaluate.evalset import EvalQuery
from toolscout.evaluate.harness import DEPTH, STRATEGIES, discover_once, eval_principal
from toolscout.evaluate.metrics import complete_at, recall_at
from toolscout.settings import SearchSettings

#: examples drawn from each set, so a large set does not outweigh a small one
PER_SET = 600
SEED = 20261130


def examples(catalog: Catalog, queries: Sequence[EvalQuery]) -> list[Example]:
    """One example per (query, gold tool): the pool's features and the gold tool's row."""
    retriever = catalog.retriever(SearchSettings())
    allowed = catalog.entitle(eval_principal(catalog)).ids
    fields: FieldTerms = retriever.phrases.fields
    texts = [q.query for q in queries]
    vectors = [retriever._embed(t) for t in texts]
    out: list[Example] = []
    for q, (qterms, lex, dense) in zip(
        queries, retriever.pools(texts, vectors, allowed), strict=True
    ):
        ids, x = features(qterms, lex, dense, fields, retriever.phrases.idf)
        rows = [ids.index(g) for g in q.gold if g in ids] or [-1]
        out += [Example(x, r) for r in rows]
    return out


def _balanced(by_set: Mapping[str, Sequence[Example]], held_out: str | None) -> list[Example]:
    return [ex for _, ex in _balanced_named(by_set, held_out)]


def _balanced_named(
    by_set: Mapping[str, Sequence[Example]], held_out: str | None
) -> list[tuple[str, Example]]:
    """:data:`PER_SET` examples drawn (seeded) from every set but ``held_out``, each with
    its set's name."""
    rng = random.Random(SEED)
    out: list[tuple[str, Example]] = []
    for name in sorted(by_set):
        if name == held_out or not by_set[name]:
            continue
        pool = list(by_set[name])
        out += [(name, pool[rng.randrange(len(pool))]) for _ in range(PER_SET)]
    return out


def fit_prior(
    by_set: Mapping[str, Sequence[Example]], held_out: str | None
) -> tuple[tuple[float, ...], float]:
    """The ranker prior fitted on every set but ``held_out`` (None: on all of them)."""
    return fit(_balanced(by_set, held_out), l2=1e-3, steps=400)


def fit_platt(
    by_set: Mapping[str, Sequence[Example]],
    held_out: str | None,
    weights: Sequence[float],
    none_bias: float,
    blend: float | Mapping[str, float] = 0.0,
) -> tuple[float, float]:
    """(a, b) so that σ(a·logit(p) + b) matches how often the top tool is right, on every
    set but ``held_out`` (the top as the ranker orders with ``blend``: one for every set,
    or each set's own, by name)."""
    z: list[float] = []
    y: list[float] = []
    for name, ex in _balanced_named(by_set, held_out):
        if not len(ex.x):
            continue
        s = scores(ex.x, weights)
        b = blend[name] if isinstance(blend, Mapping) else blend
        top = int(np.argmax(scores(ex.x, blended(weights, b))))
        p = min(max(top_probability(s, none_bias, top), 1e-6), 1 - 1e-6)
        z.append(math.log(p / (1 - p)))
        y.append(float(ex.target >= 0 and top == ex.target))
    if not z:
        return 1.0, 0.0
    zz, yy = np.array(z), np.array(y)
    a, b = 1.0, 0.0
    for _ in range(2000):
        q = 1.0 / (1.0 + np.exp(-(a * zz + b)))
        a -= 0.5 * float(((q - yy) * zz).mean())
        b -= 0.5 * float((q - yy).mean())
    return round(a, 4), round(b, 4)


# -- the blend and the dedupe yield: chosen for the worst margin over the parts ------------
#: the grid both are chosen on (0 and 0.0: the plain learned ranker and the plain dedupe)
BLENDS: tuple[float, ...] = (0.0, 2.0, 4.0, 8.0, 16.0, 32.0)
YIELDS: tuple[float, ...] = (0.0, 0.5, 0.8, 0.9, 1.0)
#: the product's own parts: the default must not lose to any of them
PARTS: tuple[str, ...] = ("bm25", "dense", "hybrid-fixed")
RECALL_K = 5

#: (blend, yield) → recall@5 of each query, in the order given
Grid = dict[tuple[float, float], list[float]]


def part_recalls(catalog: Catalog, queries: Sequence[EvalQuery]) -> dict[str, list[float]]:
    """recall@5 of each query under each of the parts (:data:`PARTS`)."""
    return {name: got[0] for name, got in part_scores(catalog, queries).items()}


def part_scores(
    catalog: Catalog, queries: Sequence[EvalQuery]
) -> dict[str, tuple[list[float], list[float]]]:
    """(recall@5, complete@5) of each query under each of the parts (:data:`PARTS`)."""
    principal = eval_principal(catalog)
    out: dict[str, tuple[list[float], list[float]]] = {}
    for name in PARTS:
        ranked = [
            discover_once(catalog, STRATEGIES[name], q.query, principal).ranked for q in queries
        ]
        out[name] = (
            [recall_at(r, q.gold, RECALL_K) for r, q in zip(ranked, queries, strict=True)],
            [complete_at(r, q.gold, RECALL_K) for r, q in zip(ranked, queries, strict=True)],
        )
    return out


def mean(values: Sequence[float]) -> float:
    return sum(values) / max(len(values), 1)


def best_part(catalog: Catalog, queries: Sequence[EvalQuery]) -> list[float]:
    """recall@5 of each query under the part with the best mean (ties: the first part)."""
    recalls = part_recalls(catalog, queries)
    return max(recalls.values(), key=mean)


def recall_grid(
    catalog: Catalog,
    queries: Sequence[EvalQuery],
    settings: SearchSettings,
    blends: Sequence[float] = BLENDS,
    yields: Sequence[float] = YIELDS,
    complete: Grid | None = None,
) -> Grid:
    """recall@5 of each query under the product default (``settings``: its prior and Platt
    step) for every (blend, yield) pair: one retrieval per query and blend, the selection
    per yield (``complete``: filled with each query's complete@5 the same way)."""
    ent = catalog.entitle(eval_principal(catalog))
    df, n_docs = catalog.store.document_frequency()
    out: Grid = {}
    for blend in blends:
        run = settings.but(ranker_blend=blend)
        selections = {y: run.but(dedupe_yield=y) for y in yields}
        got: dict[float, list[float]] = {y: [] for y in yields}
        whole: dict[float, list[float]] = {y: [] for y in yields}
        for q in queries:
            try:
                parsed = parse_query(q.query, df, n_docs, run)
            except QueryError:
                for y in yields:
                    got[y].append(0.0)  # refused: nothing found
                    whole[y].append(0.0)
                continue
            retrieval, _ = pipeline.retrieve_or_skip(catalog, parsed, ent, run)
            exact = pipeline.exact_mentions(catalog, parsed, ent, run)
            for y, chosen_by in selections.items():
                chosen = pipeline.top_k(catalog, parsed, ent, retrieval, exact, DEPTH, chosen_by)
                got[y].append(recall_at([c.id for c in chosen], q.gold, RECALL_K))
                whole[y].append(complete_at([c.id for c in chosen], q.gold, RECALL_K))
        for y in yields:
            out[(blend, y)] = got[y]
            if complete is not None:
                complete[(blend, y)] = whole[y]
    return out


def choose_blend(
    grids: Mapping[str, Grid], parts: Mapping[str, Sequence[float]], held_out: str | None
) -> tuple[float, float]:
    """The (blend, yield) whose worst mean margin over the best part, across every set but
    ``held_out``, is largest; on a tie of the worst margins, the larger mean margin over
    those sets (as ``orders_guards.choose`` breaks its ties), then the smaller blend, then
    the smaller yield."""
    names = [n for n in sorted(grids) if n != held_out]
    if not names:
        raise ValueError("choose_blend needs at least one set besides the held-out one")
    pairs = sorted(set.intersection(*(set(grids[n]) for n in names)))
    if not pairs:
        raise ValueError("the sets' grids share no (blend, yield) pair")

    def margins(pair: tuple[float, float]) -> tuple[float, float]:
        m = [mean(grids[n][pair]) - mean(parts[n]) for n in names]
        return min(m), mean(m)

    best = pairs[0]
    for pair in pairs[1:]:
        (worst, avg), (best_worst, best_avg) = margins(pair), margins(best)
        if worst > best_worst + 1e-9 or (worst > best_worst - 1e-9 and avg > best_avg + 1e-9):
            best = pair
    return best


def clustered_difference(diffs: Sequence[float], clusters: Sequence[str]) -> list[float]:
    """[mean, standard error, n] of paired per-query differences; the SE is cluster-robust
    (queries of one ``clusters`` key — e.g. the single-tool pseudo-queries of one tool — are
    summed before their spread is taken, with the G/(G−1) correction). No queries: [0, 0, 0];
    one cluster: the SE is infinite (nothing can be significant)."""
    n = len(diffs)
    if n != len(clusters):
        raise ValueError(f"clustered_difference: {n} differences but {len(clusters)} cluster keys")
    if not n:
        return [0.0, 0.0, 0.0]
    avg = sum(diffs) / n
    sums: dict[str, float] = {}
    for d, c in zip(diffs, clusters, strict=True):
        sums[c] = sums.get(c, 0.0) + (d - avg)
    g = len(sums)
    if g < 2:
        return [round(avg, 6), float("inf"), float(n)]
    var = g / (g - 1) * sum(v * v for v in sums.values()) / (n * n)
    return [round(avg, 6), round(var**0.5, 6), float(n)]


def paired_interval(
    a: Sequence[float], b: Sequence[float], *, rounds: int = 2000, seed: int = SEED
) -> tuple[float, float, float]:
    """mean(a − b) and its 95% paired bootstrap interval (queries resampled, seeded)."""
    if len(a) != len(b) or not a:
        raise ValueError("paired_interval needs two equally long, non-empty sequences")
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(rounds, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(low), float(high)
