"""Index-time evidence the product does not measure: a catalog's blend per catalog, and the
lexical lead's evidence cross-fitted. Measurement for benchmark screens, not product code.

Both were built in ``discovery/`` behind a switch that was off as shipped — the blend per
catalog (h/blend17, round twenty-three: ``ranker.BLENDS``, ``BLEND_MARGIN`` None,
``catalog_blend``, ``Calibration.blend_recall``, ``calibrate(measure_blends=)``,
``fitting.choose_blend_margin``) and the cross-fit (h/xfit18, round twenty-four:
``calibrate.CROSS_FIT`` False, ``calibrate(cross_fit=)``). Round twenty-five (h/shape19)
moved them here: the product keeps only what it runs, and every screen computes its own
evidence from the calibration's pure per-query readings (``calibrate.pseudo_queries``,
``pseudo_examples``, ``fold_fits``, ``single_hits``; ``orders.multi_queries``). The numbers
are the ones the product's calibration stored when the switches were on
(``tests/test_blend17_catalog_blend.py`` and ``tests/test_xfit18_crossfit.py`` compare them
with values written out from the base code).

* :func:`catalog_runs` — a catalog's pseudo-queries run through its own retrievers, as
  ``Catalog.calibrate`` runs them (the single-tool ones, then the multi-tool ones);
* :func:`blend_recall` — the multi-tool pseudo-queries' recall@5 at each of :data:`BLENDS`
  with the fold-0 ranker ordering (what ``Calibration.blend_recall`` held);
* :func:`cross_fitted_recall` — ``pseudo_recall`` over every single-tool pseudo-query, each
  fold scored by a ranker fitted on the others (what ``calibrate(cross_fit=True)`` stored);
* :func:`measure` — both for one open catalog;
* :func:`catalog_blend`, :data:`BLEND_MARGINS`, :func:`choose_blend_margin` — the choice of a
  blend per catalog and its margin, leave-one-set-out (``quality.py --blend-by catalog``).

No evaluation query is read here: the evidence is made from the catalog's cards alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolscout.discovery import calibrate as cal
from toolscout.discovery import orders as order_choice
from toolscout.discovery.features import FieldTerms, features
from toolscout.discovery.ranker import BLEND, ordered
from toolscout.evaluate.fitting import YIELDS, Grid, mean
from toolscout.stores.base import Hits

#: the blends a catalog chooses between (:func:`catalog_blend`): the smaller where its own
#: multi-tool pseudo-queries (made from its cards, no real request) find more at it than at
#: the larger by more than a margin, else the larger. On the dev sets one blend for every
#: catalog cannot serve them all: 4 is what toolbench, restbench and apibench prefer and
#: metatool cannot take, and every leave-one-set-out fit of one blend chooses 32
#: (docs/history/calibration.md, round twenty-three). Not shipped: chosen leave-one-set-out
#: the margin is 0, but the fold without toolalpaca leads it lexical at 0.932 held out,
#: below its best part, and the held-out confidence is worse on five sets
BLENDS: tuple[float, float] = (4.0, 32.0)
#: the margins a catalog's blend evidence is read with (:func:`catalog_blend`): -1 takes the
#: smaller blend wherever a catalog has evidence, 1 never takes it
BLEND_MARGINS: tuple[float, ...] = (-1.0, 0.0, 0.01, 0.02, 0.03, 0.05, 1.0)

#: a multi-tool pseudo-query's run: (query terms, lexical hits, dense hits, its gold ids)
MultiRun = tuple[Sequence[str], Hits, Hits, tuple[str, ...]]


@dataclass(frozen=True)
class CatalogRuns:
    """A catalog's pseudo-queries of one seed and their runs through its retrievers."""

    pseudo: list[cal.Pseudo]
    runs: list[tuple[Sequence[str], Hits, Hits]]
    examples: list[cal.Example]
    #: the multi-tool pseudo-queries' runs (empty when not asked for)
    multis: list[MultiRun]
    fields: FieldTerms
    idf: Callable[[str], float]
    n_tools: int


def catalog_runs(cat: Any, seed: int = cal.SEED, multi: bool = True) -> CatalogRuns | None:
    """An open catalog's pseudo-queries of ``seed`` run through its own retriever (default
    search settings) as ``Catalog.calibrate`` runs them: the single-tool ones, then
    (``multi``) the multi-tool ones of ``orders.multi_queries``, each embedded afresh. None
    when the catalog has fewer tools than ``calibrate.MIN_TOOLS`` (no calibration fits)."""
    from toolscout.discovery.queryvectors import embed_keys
    from toolscout.settings import SearchSettings

    retriever = cat.retriever(SearchSettings())
    specs = cat.specs()
    if len(specs) < cal.MIN_TOOLS:
        return None
    allowed = frozenset(s.id for s in specs)

    def run(texts: Sequence[str]) -> list[tuple[Sequence[str], Hits, Hits]]:
        vectors = retriever._embed_all(embed_keys(texts), cache=False)
        out: list[tuple[Sequence[str], Hits, Hits]] = retriever.pools(texts, vectors, allowed)
        return out

    fields, idf = retriever.phrases.fields, retriever.phrases.idf
    pseudo = cal.pseudo_queries(specs, seed)
    runs = run([p.text for p in pseudo])
    multis = order_choice.multi_queries(specs, seed) if multi else []
    multi_runs = run([m.text for m in multis]) if multis else []
    return CatalogRuns(
        pseudo=list(pseudo),
        runs=runs,
        examples=cal.pseudo_examples(pseudo, runs, fields, idf),
        multis=[
            (q, lex, dense, m.gold) for m, (q, lex, dense) in zip(multis, multi_runs, strict=True)
        ],
        fields=fields,
        idf=idf,
        n_tools=len(specs),
    )


def blend_recall(
    multis: Sequence[MultiRun],
    fields: FieldTerms,
    idf: Callable[[str], float],
    weights: Sequence[float],
    blends: Sequence[float] = BLENDS,
) -> dict[str, float]:
    """The multi-tool pseudo-queries' recall@5 with the ranker ordering (``weights`` plus the
    blend times the fixed fusion) at each of ``blends``, keyed ``f"{blend:g}"`` and rounded
    to 3 places; empty without queries."""
    if not multis:
        return {}
    pools = [features(q, lex, dense, fields, idf) for q, lex, dense, _ in multis]
    out: dict[str, float] = {}
    for blend in blends:
        recall: list[float] = []
        for (ids, x), (*_, gold) in zip(pools, multis, strict=True):
            top = {ids[i] for i in cal._top5(ordered(x, weights, blend))} if ids else set()
            recall.append(sum(g in top for g in gold) / len(gold))
        out[f"{blend:g}"] = round(sum(recall) / len(recall), 3)
    return out


def cross_fitted_recall(
    runs: CatalogRuns,
    prior: Sequence[float] = cal.PRIOR,
    prior_none: float = cal.PRIOR_NONE,
) -> dict[str, float]:
    """The single-tool pseudo recall@5 of BM25, dense and the ranker over every fold of
    :data:`calibrate.FOLDS`, each fold scored by a ranker fitted from ``prior`` on the
    others (``calibrate.fold_fits``), rounded to 3 places: the lead's evidence cross-fitted."""
    fits = cal.fold_fits(runs.examples, prior, prior_none, cal.FOLDS)
    rows = cal.single_hits(runs.pseudo, runs.runs, runs.examples, [w for w, _ in fits])
    n = max(len(rows), 1)
    return {k: round(sum(float(r[k]) for r in rows) / n, 3) for k in ("bm25", "dense", "ranker")}


def measure(
    cat: Any,
    seed: int = cal.SEED,
    prior: Sequence[float] = cal.PRIOR,
    prior_none: float = cal.PRIOR_NONE,
) -> dict[str, dict[str, float]]:
    """One open catalog's ``blend_recall`` (the fold-0 ranker, fitted from ``prior``, as the
    calibration's own start) and cross-fitted ``pseudo_recall``; both empty when the catalog
    is too small to calibrate."""
    runs = catalog_runs(cat, seed)
    if runs is None:
        return {"blend_recall": {}, "pseudo_recall": {}}
    ((weights, _),) = cal.fold_fits(runs.examples, prior, prior_none, 1)
    return {
        "blend_recall": blend_recall(runs.multis, runs.fields, runs.idf, weights),
        "pseudo_recall": cross_fitted_recall(runs, prior, prior_none),
    }


def catalog_blend(evidence: Mapping[str, float], margin: float | None) -> float:
    """The blend a catalog's order takes: the smaller of :data:`BLENDS` when its multi-tool
    pseudo recall@5 at it (``evidence``: :func:`blend_recall`'s) exceeds the larger's by
    more than ``margin``, else the larger (also when the catalog has no such evidence);
    the product's ``ranker.BLEND`` when ``margin`` is None (the evidence is not read)."""
    if margin is None:
        return BLEND
    low, high = BLENDS
    at_low, at_high = evidence.get(f"{low:g}"), evidence.get(f"{high:g}")
    if at_low is None or at_high is None:
        return high
    return low if round(at_low - at_high, 6) > margin else high


def choose_blend_margin(
    grids: Mapping[str, Grid],
    parts: Mapping[str, Sequence[float]],
    evidence: Mapping[str, Mapping[str, float]],
    held_out: str | None,
    margins: Sequence[float] = BLEND_MARGINS,
    yields: Sequence[float] = YIELDS,
) -> tuple[float, float]:
    """The (margin, yield) of a blend chosen per catalog from its own evidence
    (``evidence``: each set's :func:`blend_recall`; each set takes
    :func:`catalog_blend` of it at the margin): the pair whose worst mean margin over the
    best part, across every set but ``held_out``, is largest, as ``fitting.choose_blend``
    chooses — on a tie the larger mean margin, then the smaller margin, then the smaller
    yield."""
    names = [n for n in sorted(grids) if n != held_out]
    if not names:
        raise ValueError("choose_blend_margin needs at least one set besides the held-out one")
    missing = [n for n in names if n not in evidence]
    if missing:
        raise ValueError(f"choose_blend_margin has no blend evidence for {missing}")
    best: tuple[float, float] | None = None
    best_key = (-math.inf, -math.inf)
    for margin in sorted(margins):
        for y in sorted(yields):
            pairs = [(catalog_blend(evidence[n], margin), y) for n in names]
            if any(p not in grids[n] for n, p in zip(names, pairs, strict=True)):
                continue
            m = [mean(grids[n][p]) - mean(parts[n]) for n, p in zip(names, pairs, strict=True)]
            worst, avg = min(m), mean(m)
            if worst > best_key[0] + 1e-9 or (
                worst > best_key[0] - 1e-9 and avg > best_key[1] + 1e-9
            ):
                best, best_key = (margin, y), (worst, avg)
    if best is None:
        raise ValueError("the sets' grids hold no (blend, yield) pair the margins choose")
    return best
