"""Per-catalog calibration: a small ranker fitted on pseudo-queries made from the catalog alone.

No evaluation query is ever seen here. At index time :func:`calibrate` writes text
*about* a seeded sample of tools (:func:`pseudo.pseudo_queries`), runs each through the
same two retrievers the product uses (BM25 and dense), gives every candidate of the pool
a few cheap features (:func:`features.features`) and fits a conditional logit over them
(:func:`logit.fit`), so the catalog itself decides how much to trust each signal: a
catalog whose descriptions embed poorly leans lexical, one whose names are opaque leans
dense. With the order choice on, it also measures each order of discovery/orders.py on
held-out pseudo-queries.

:class:`Calibration` is what is stored with the catalog (JSON in the store's meta);
:func:`stale` says when the catalog changed enough to fit again.

The parts live in their own modules; this one is their public face (``__all__``
re-exports what callers read of them):

* discovery/features.py — the features of a (request, candidate) pair, :class:`FieldTerms`;
* discovery/pseudo.py — the pseudo-queries;
* discovery/logit.py — the conditional logit, its prior (:data:`PRIOR`) and its fit;
* discovery/ranker.py — :class:`Ranker`: the order and the probability that its top is
  right (:data:`PLATT`, :data:`BLEND`, the lexical lead :data:`LEAD`);
* discovery/confidence.py — the confidence a shortlist reports (:data:`CONFIDENCE`) and
  a catalog's correction of it learned from its log (:class:`ConfidenceShift`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import numpy.typing as npt

from toolscout.cards import ToolSpec
from toolscout.discovery import orders as order_choice
from toolscout.discovery.confidence import (
    CONFIDENCE,
    CONFIDENCE_INPUTS,
    MAX_SHIFT,
    SHIFT_META,
    SHIFT_PRIOR_SD,
    ConfidenceShift,
    Scored,
    confidence,
    confidence_inputs,
    fit_confidence,
    fit_shift,
    sigmoid,
)
from toolscout.discovery.features import (
    AGREE_AT,
    FEATURES,
    LONG_TERMS,
    POOL,
    RARE_CAP,
    RARE_IDF_SHARE,
    SHAPE_FEATURES,
    FieldTerms,
    Matrix,
    features,
    idf_of,
)
from toolscout.discovery.features import _shape as _shape  # read by benchmarks/ranker_features.py
from toolscout.discovery.logit import L2, PRIOR, PRIOR_NONE, STEPS, Example, fit
from toolscout.discovery.pseudo import SAMPLE_TOOLS, SEED, Pseudo, pseudo_queries
from toolscout.discovery.ranker import (
    BLEND,
    FIXED_MIX,
    LEAD,
    LEAD_MARGIN,
    ORDER_PRIOR,
    ORDER_SCALE,
    PLATT,
    Ranker,
    blended,
    ordered,
    platt,
    scores,
    top_probability,
)
from toolscout.errors import ConfigError
from toolscout.stores.base import Hits, Vector

__all__ = [
    "AGREE_AT",
    "BLEND",
    "CONFIDENCE",
    "CONFIDENCE_INPUTS",
    "Calibration",
    "ConfidenceShift",
    "Example",
    "FEATURES",
    "FIXED_MIX",
    "FOLDS",
    "FieldTerms",
    "L2",
    "LEAD",
    "LEAD_MARGIN",
    "LONG_TERMS",
    "MAX_SHIFT",
    "MIN_TOOLS",
    "Matrix",
    "ORDER_PRIOR",
    "ORDER_SCALE",
    "PLATT",
    "POOL",
    "PRIOR",
    "PRIOR_NONE",
    "Pseudo",
    "RARE_CAP",
    "RARE_IDF_SHARE",
    "REFIT_SHARE",
    "Ranker",
    "Retrieve",
    "SAMPLE_TOOLS",
    "SEED",
    "SHAPE_FEATURES",
    "SHIFT_META",
    "SHIFT_PRIOR_SD",
    "STEPS",
    "Scored",
    "VERSION",
    "blended",
    "calibrate",
    "check_prior",
    "confidence",
    "confidence_inputs",
    "features",
    "fingerprint",
    "fit",
    "fit_confidence",
    "fit_shift",
    "fold_fits",
    "idf_of",
    "leads_lexical",
    "ordered",
    "platt",
    "pseudo_examples",
    "pseudo_queries",
    "scores",
    "sigmoid",
    "single_hits",
    "stale",
    "top_probability",
]

#: bump when features or pseudo-queries change: stored calibrations of another version refit.
#: A calibration stored by rounds twenty-three and twenty-four holds a ``blend_recall`` field
#: (the blend per catalog's evidence, measured only when its switch was on; the switch and
#: the measurement are benchmark-side since round twenty-five, benchmarks/catalog_evidence.py):
#: it loads at this version without it (:meth:`Calibration.from_json`), nothing refits
VERSION = 4
#: the single-tool pseudo-queries' folds (``i % FOLDS``): fold 0 is held out from the fit the
#: final one starts from, and ``pseudo_recall`` (what the lexical lead reads) is read on it.
#: :func:`fold_fits` fits any of the folds (benchmarks/catalog_evidence.py cross-fits the
#: lead's evidence over all of them: h/xfit18, round twenty-four, not shipped)
FOLDS = 5
#: refit when this share of the catalog's tools were added, changed or removed since the fit
REFIT_SHARE = 0.1
#: fewer tools than this: the prior is kept (too few pseudo-queries to fit 9 numbers)
MIN_TOOLS = 12


def leads_lexical(pseudo_recall: Mapping[str, float], margin: float | None = None) -> bool:
    """Does BM25 lead this catalog's order? Its pseudo-query recall@5 beats the ranker's
    by more than ``margin`` (None: :data:`LEAD_MARGIN`)."""
    bm25, ranker = pseudo_recall.get("bm25"), pseudo_recall.get("ranker")
    if bm25 is None or ranker is None:
        return False
    return bm25 - ranker > (LEAD_MARGIN if margin is None else margin)


@dataclass(frozen=True, slots=True)
class Calibration:
    """Ranker weights fitted for one catalog, and how they were fitted."""

    weights: tuple[float, ...] = PRIOR
    none_bias: float = PRIOR_NONE
    #: the prior the fit started from and was shrunk towards
    prior: tuple[float, ...] = PRIOR
    prior_none: float = PRIOR_NONE
    version: int = VERSION
    fingerprint: str = ""
    n_tools: int = 0
    n_pseudo: int = 0
    seconds: float = 0.0
    #: pseudo-query recall@5 of each single signal and of the fitted ranker
    pseudo_recall: dict[str, float] = field(default_factory=dict)
    fitted: bool = False
    #: each order of :data:`orders.ORDERS` on the held-out single-tool pseudo-queries
    #: ("single": recall@5) and on the multi-tool ones ("multi": the mean of recall@5 and
    #: complete@5; "multi_recall", "multi_complete"): what :func:`orders.choose` reads.
    #: Measured only when the catalog's settings turn the choice on (empty: the ranker orders)
    orders: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, raw: str) -> Calibration | None:
        """A stored calibration, or None when it is unreadable or of another version (a
        ``blend_recall`` field, which rounds twenty-three and twenty-four stored, is dropped:
        nothing in the product reads it)."""
        try:
            d = json.loads(raw)
            if d.get("version") != VERSION or len(d.get("weights", ())) != len(FEATURES):
                return None
            for key in ("weights", "prior"):
                d[key] = tuple(float(w) for w in d[key])
            d["orders"] = {
                str(k): {str(o): float(v) for o, v in got.items()}
                for k, got in d.get("orders", {}).items()
            }
            d.pop("blend_recall", None)
            if len(d["prior"]) != len(FEATURES):
                return None
            return cls(**d)
        except (ValueError, TypeError, AttributeError):
            return None

    def describe(self, margin: float | None = None, order_margin: float | None = None) -> str:
        """One line for the index report and ``eval``: what the default does with this
        catalog (``margin``: the lexical lead's, None: :data:`LEAD_MARGIN`;
        ``order_margin``: the order choice's, None: :data:`orders.ORDER_MARGIN`)."""
        if not self.fitted:
            return f"calibration: prior weights ({self.n_tools} tools, too few to fit)"
        recall = ", ".join(f"{k} {v:.2f}" for k, v in self.pseudo_recall.items())
        om = order_choice.ORDER_MARGIN if order_margin is None else order_margin
        chosen = order_choice.describe(self.orders, om)
        if chosen:
            multi = self.orders.get("multi", {})
            seen = ", ".join(f"{k} {v:.2f}" for k, v in multi.items())
            return (
                f"calibration: {self.n_pseudo} pseudo-queries over {self.n_tools} tools in "
                f"{self.seconds:.1f}s; {chosen}; pseudo recall@5 {recall}; "
                f"multi-tool pseudo recall+complete@5 {seen}"
            )
        if self.leads_lexical(margin):
            how = "leans lexical (BM25 leads the order: the ranker is below it here)"
        else:
            how = f"leans {self.lean()} (the learned ranker orders)"
        return (
            f"calibration: {self.n_pseudo} pseudo-queries over {self.n_tools} tools in "
            f"{self.seconds:.1f}s; {how}; pseudo recall@5 {recall}"
        )

    def leads_lexical(self, margin: float | None = None) -> bool:
        """Does BM25 lead this catalog's order (:func:`leads_lexical`)? Never unfitted."""
        return self.fitted and leads_lexical(self.pseudo_recall, margin)

    def weights_over(self, prior: Sequence[float] | None) -> tuple[tuple[float, ...], float]:
        """The weights with this catalog's adjustment applied over another prior (or its own).

        ``prior`` holds one weight per feature and, last, the none option's bias.
        """
        if prior is None:
            return self.weights, self.none_bias
        check_prior(prior, "the ranker's prior")
        pw, pb = prior[: len(FEATURES)], prior[len(FEATURES)]
        w = tuple(p + (a - b) for p, a, b in zip(pw, self.weights, self.prior, strict=True))
        return w, pb + (self.none_bias - self.prior_none)

    def order_weights_over(self, order_prior: Sequence[float]) -> tuple[float, ...]:
        """The order's own weights (:data:`ranker.ORDER_PRIOR`, or another fit of it) with
        this catalog's adjustment of the prior added, as :meth:`weights_over` adds it."""
        if len(order_prior) != len(FEATURES):
            raise ValueError(
                f"the order's prior holds {len(order_prior)} weights; expected one per "
                f"feature ({len(FEATURES)}: {', '.join(FEATURES)})"
            )
        weights, _ = self.weights_over((*map(float, order_prior), self.prior_none))
        return weights

    def lean(self) -> str:
        w = dict(zip(FEATURES, self.weights, strict=True))
        lex = abs(w["lexical"]) + abs(w["lexical_rank"])
        dense = abs(w["cosine"]) + abs(w["cosine_norm"]) + abs(w["cosine_gap"])
        ratio = dense / max(lex + dense, 1e-9)
        return "dense" if ratio > 0.65 else "lexical" if ratio < 0.35 else "balanced"


def check_prior(prior: Sequence[float], what: str) -> None:
    """A prior holds one weight per feature, then the none option's bias: a ConfigError
    naming ``what``, the width it has and the one expected otherwise (a prior written for
    another version's :data:`FEATURES`)."""
    if len(prior) != len(FEATURES) + 1:
        raise ConfigError(
            f"{what} holds {len(prior)} values; expected one weight per feature "
            f"({len(FEATURES)}: {', '.join(FEATURES)}) and then the none option's bias"
        )


def fingerprint(specs: Sequence[ToolSpec]) -> str:
    """A digest of the catalog's ids and indexed texts (order-independent)."""
    h = hashlib.sha256()
    for key in sorted(f"{s.id}\x1f{s.card.name}\x1f{s.card.summary}" for s in specs):
        h.update(key.encode())
        h.update(b"\x1e")
    return h.hexdigest()[:16]


def stale(cal: Calibration | None, n_tools: int, changed: int) -> bool:
    """Fit again? When there is none, it is of another version, or enough tools changed."""
    if cal is None or cal.version != VERSION:
        return True
    return changed > REFIT_SHARE * max(cal.n_tools, n_tools, 1)


Retrieve = Callable[[Sequence[str], Sequence[Vector]], list[tuple[Sequence[str], Hits, Hits]]]


def calibrate(
    specs: Sequence[ToolSpec],
    retrieve: Retrieve,
    fields: FieldTerms,
    idf: Callable[[str], float],
    *,
    embed: Callable[[Sequence[str]], Sequence[Vector]],
    seed: int = SEED,
    start: Sequence[float] | None = None,
    blend: float = BLEND,
    measure_orders: bool = False,
) -> Calibration:
    """Fit the ranker for this catalog from its own pseudo-queries.

    ``retrieve(texts, vectors)`` runs each pseudo-query through the product's
    lexical and dense retrievers and returns (query terms, lexical hits, dense hits).
    ``start`` is the prior (one weight per feature, then the none bias; default: shipped);
    ``blend`` the fixed fusion's share of the order the orders are measured with, when
    ``measure_orders`` (the choice of discovery/orders.py is on: the multi-tool
    pseudo-queries cost index time, about a third of the calibration's on bfcl).
    ``pseudo_recall`` is read on the held-out fifth (fold 0 of :data:`FOLDS`), whose fit the
    final one starts from. Its per-query readings are the pure functions below
    (:func:`pseudo_examples`, :func:`fold_fits`, :func:`single_hits`): benchmark screens
    compute other evidence from them (benchmarks/catalog_evidence.py).
    """
    began = time.perf_counter()
    if start is not None:
        check_prior(start, "the calibration's start")
    prior = PRIOR if start is None else tuple(float(w) for w in start[: len(FEATURES)])
    prior_none = PRIOR_NONE if start is None else float(start[len(FEATURES)])
    if len(specs) < MIN_TOOLS:
        return Calibration(
            prior, prior_none, prior, prior_none, n_tools=len(specs), fingerprint=fingerprint(specs)
        )
    pseudo = pseudo_queries(specs, seed)
    texts = [p.text for p in pseudo]
    runs = retrieve(texts, embed(texts))
    # the multi-tool pseudo-queries, run on their own (the single ones' pools stay as they
    # were): the orders' evidence, when the choice is on
    multis = order_choice.multi_queries(specs, seed) if measure_orders else []
    multi_texts = [m.text for m in multis]
    multi_runs = retrieve(multi_texts, embed(multi_texts)) if multis else []
    examples = pseudo_examples(pseudo, runs, fields, idf)
    singles: dict[str, list[float]] = {"bm25": [], "dense": [], "ranker": []}
    # hold out every 5th example to report the fitted ranker's pseudo recall honestly
    ((weights, none_bias),) = fold_fits(examples, prior, prior_none, 1)  # the final's start
    rows = single_hits(pseudo, runs, examples, [weights])
    for row in rows:
        for key in singles:
            singles[key].append(float(row[key]))
    held = [
        (ex.x, (ex.target,) if ex.target >= 0 else ())
        for i, (p, ex) in enumerate(zip(pseudo, examples, strict=True))
        if i % FOLDS == 0 and p.tool_id is not None
    ]
    multi = [(q, lex, dense, m.gold) for m, (q, lex, dense) in zip(multis, multi_runs, strict=True)]
    measured = _measure_orders(held, multi, fields, idf, weights, blend) if measure_orders else {}
    weights, none_bias = fit(
        examples, prior=prior, prior_none=prior_none, start=weights, start_none=none_bias,
        steps=STEPS // 3,
    )  # fmt: skip
    return Calibration(
        weights=weights,
        none_bias=none_bias,
        prior=prior,
        prior_none=prior_none,
        fingerprint=fingerprint(specs),
        n_tools=len(specs),
        n_pseudo=len(pseudo),
        seconds=round(time.perf_counter() - began, 3),
        pseudo_recall={k: round(sum(v) / max(len(v), 1), 3) for k, v in singles.items()},
        fitted=True,
        orders=measured,
    )


def pseudo_examples(
    pseudo: Sequence[Pseudo],
    runs: Sequence[tuple[Sequence[str], Hits, Hits]],
    fields: FieldTerms,
    idf: Callable[[str], float],
) -> list[Example]:
    """Each pseudo-query's pool as the ranker reads it (:func:`features`) and the row of its
    tool there (-1: not in the pool, or a query no tool answers)."""
    out: list[Example] = []
    for p, (qterms, lex, dense) in zip(pseudo, runs, strict=True):
        ids, x = features(qterms, lex, dense, fields, idf)
        target = ids.index(p.tool_id) if p.tool_id is not None and p.tool_id in ids else -1
        out.append(Example(x, target))
    return out


def fold_fits(
    examples: Sequence[Example], prior: Sequence[float], prior_none: float, n: int = FOLDS
) -> list[tuple[tuple[float, ...], float]]:
    """The (weights, none bias) of folds 0 to ``n`` − 1 (at most :data:`FOLDS`), each fitted
    by :func:`logit.fit` from ``prior`` on the examples of the other folds (``i % FOLDS``)."""
    return [
        fit([e for i, e in enumerate(examples) if i % FOLDS != k], prior=prior,
            prior_none=prior_none)
        for k in range(min(n, FOLDS))
    ]  # fmt: skip


def single_hits(
    pseudo: Sequence[Pseudo],
    runs: Sequence[tuple[Sequence[str], Hits, Hits]],
    examples: Sequence[Example],
    folds: Sequence[Sequence[float]],
) -> list[dict[str, float | str | int]]:
    """Each single-tool pseudo-query of the scored folds (``folds``: the ranker's weights of
    fold 0, 1, ... — one: the held-out fifth alone; :data:`FOLDS`: every query) — its tool,
    its fold and whether BM25, dense and the fold's ranker put the tool in the first five."""
    out: list[dict[str, float | str | int]] = []
    for i, (p, (_, lex, dense), ex) in enumerate(zip(pseudo, runs, examples, strict=True)):
        if p.tool_id is None or i % FOLDS >= len(folds):
            continue
        top = np.argsort(-scores(ex.x, folds[i % FOLDS]))[:5]
        out.append(
            {
                "tool": p.tool_id,
                "fold": i % FOLDS,
                "bm25": float(p.tool_id in lex.ids[:5]),
                "dense": float(p.tool_id in dense.ids[:5]),
                "ranker": float(ex.target >= 0 and ex.target in top),
            }
        )
    return out


def _top5(r: npt.NDArray[np.float64]) -> list[int]:
    return [int(i) for i in np.argsort(-r, kind="stable")[:5]]


def _measure_orders(
    singles: Sequence[tuple[Matrix, tuple[int, ...]]],
    multis: Sequence[tuple[Sequence[str], Hits, Hits, tuple[str, ...]]],
    fields: FieldTerms,
    idf: Callable[[str], float],
    weights: Sequence[float],
    blend: float,
) -> dict[str, dict[str, float]]:
    """Each order's recall@5 on the held-out single-tool pseudo-queries (``singles``: the
    pool's features and the right row, none when retrieval missed it) and its recall@5 and
    complete@5 on the multi-tool ones (``multis``: the runs and their gold ids)."""
    out: dict[str, dict[str, float]] = {"single": {}, "multi": {}}
    out.update(multi_recall={}, multi_complete={})
    pools = [features(q, lex, dense, fields, idf) for q, lex, dense, _ in multis]
    for order in order_choice.ORDERS:
        hits = [
            float(bool(t) and t[0] in _top5(ordered(x, weights, blend, order))) for x, t in singles
        ]
        out["single"][order] = round(sum(hits) / max(len(hits), 1), 3)
        recall: list[float] = []
        complete: list[float] = []
        for (ids, x), (*_, gold) in zip(pools, multis, strict=True):
            top = {ids[i] for i in _top5(ordered(x, weights, blend, order))} if ids else set()
            found = sum(g in top for g in gold)
            recall.append(found / len(gold))
            complete.append(float(found == len(gold)))
        if recall:
            r, c = sum(recall) / len(recall), sum(complete) / len(complete)
            out["multi_recall"][order], out["multi_complete"][order] = round(r, 3), round(c, 3)
            out["multi"][order] = round((r + c) / 2, 3)
    return out
