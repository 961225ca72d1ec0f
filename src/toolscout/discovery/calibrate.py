"""Per-catalog calibration: a small ranker fitted on pseudo-queries made from the catalog alone.

No evaluation query is ever seen here. At index time :func:`pseudo_queries`
writes, for a seeded sample of tools, text *about* each tool that is not its
indexed text verbatim: its summary with the name's words masked and half its
words dropped, its parameter descriptions, its aliases. Each pseudo-query is
run through the same two retrievers the product uses (BM25 and dense), and
every candidate of the pool gets a few cheap features (:data:`FEATURES`). A
conditional logit (softmax over the pool plus a "none of these" option) is
fitted with numpy (:func:`fit`), so the catalog itself decides how much to
trust each signal: a catalog whose descriptions embed poorly leans lexical, one
whose names are opaque leans dense.

The same model gives the ranker's probability that its top candidate is the
right tool, out of the pool *and* the "none" option. Nonsense (text whose words
are not in the catalog and whose vector is close to nothing) comes out low
because the none option wins. A Platt step (:data:`PLATT`) maps the
pseudo-query probability onto real requests; retrieval reformulates below the
threshold on that number.

The confidence a shortlist reports (:func:`confidence`) is one step further: a
logistic model (:data:`CONFIDENCE`) over a few cheap inputs that do not depend on
the catalog (:func:`confidence_inputs`): that probability's logit, whether the
shown first tool is an exact mention of a name or id and how specific that
mention is, how many tools were mentioned, the ranker's margin, the top's cosine
and BM25. An exact mention of a generic name is therefore no longer reported as
certain. :data:`PRIOR`, :data:`PLATT` and :data:`CONFIDENCE` are the constants
chosen on evaluation data, each fitted leave-one-set-out by
``benchmarks/quality.py`` (docs/benchmarks.md).

:class:`Calibration` is what is stored with the catalog (JSON in the store's
meta); :func:`stale` says when the catalog changed enough to fit again.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import asdict, dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from toolscout.cards import CapabilityCard, ToolSpec
from toolscout.discovery import orders as order_choice
from toolscout.discovery.lexical import identifiers, phrase_key, terms, words
from toolscout.stores.base import Hits, Vector

Matrix = npt.NDArray[np.float64]

#: the features of one (query, candidate) pair, in column order
FEATURES: tuple[str, ...] = (
    "lexical",  # BM25 / best BM25 of the query (0 when not in the lexical pool)
    "lexical_rank",  # 1 / (1 + rank) in the lexical pool, 0 when absent
    "cosine",  # dense cosine to the card (or alias) vector
    "cosine_norm",  # cosine min-max normalised over the pool
    "cosine_gap",  # cosine minus the pool's best cosine (<= 0)
    "name",  # idf share of the tool's name terms found in the query
    "summary",  # idf share of the query's terms found in the summary
    "dense_rank",  # 1 / (1 + rank) in the dense pool, 0 when absent
    "both",  # lexical x normalised cosine: both signals agree
)
#: the request's shape, read per candidate (a constant of the query alone would cancel in
#: the softmax over the pool: each is an interaction with a candidate's signal), appended
#: after :data:`FEATURES` by ``features(shape=True)``. **Not used by the default**: fitted
#: leave-one-set-out they did not raise held-out recall@5 on any set beyond noise and cost
#: bfcl 0.007 (benchmarks/ranker_features.py, docs/benchmarks.md "This round: per-query
#: features"), so the ranker reads :data:`FEATURES` only unless ``Ranker.shape``
SHAPE_FEATURES: tuple[str, ...] = (
    "rare",  # distinct rare query terms (RARE_IDF_SHARE) in the name or summary, /RARE_CAP
    "lexical_long",  # lexical x the query's length (LONG_TERMS)
    "lexical_rank_long",  # lexical_rank x the query's length
    "cosine_long",  # cosine_norm x the query's length
    "lexical_disagree",  # lexical x (1 - overlap of the two lists' first AGREE_AT)
    "cosine_disagree",  # cosine_norm x (1 - that overlap)
    "lexical_parts",  # lexical when the request reads in several parts (discovery/parts.py)
)
#: bump when features or pseudo-queries change: stored calibrations of another version refit
VERSION = 4
#: a query term is rare when its idf is at least this share of the catalog's largest idf
RARE_IDF_SHARE = 0.5
#: the rare-term count saturates here
RARE_CAP = 3
#: the query's length (distinct content terms) saturates here
LONG_TERMS = 24
#: the lexical and dense lists agree by the overlap of their first this many
AGREE_AT = 10
#: tools sampled for pseudo-queries (bounded: index time stays flat at 100k tools)
SAMPLE_TOOLS = 200
#: candidates per retriever in calibration (as many as the query-time pool)
POOL = 50
SEED = 20261130
#: refit when this share of the catalog's tools were added, changed or removed since the fit
REFIT_SHARE = 0.1
#: L2 penalty and steps of the fit
L2 = 0.3
STEPS = 300
#: Platt scaling of the pseudo-query probability onto real requests: conf = σ(a·logit(p) + b)
PLATT: tuple[float, float] = (0.8892, -0.0186)
#: the prior weights, used before a catalog is calibrated (or when it is too small to fit):
#: the conditional logit fitted on the five dev sets' queries (benchmarks/quality.py, which
#: also refits them with each set held out and reports both)
PRIOR: tuple[float, ...] = (2.9926, 0.0528, 2.6806, 1.7125, 3.8062, 1.1823, 1.3601, 0.6734, -1.2883)
PRIOR_NONE = 4.2753
#: the fixed weighted fusion (``fusion="weighted"`` without adaptation: 0.3 × BM25 relative
#: to the best + 0.7 × min-max cosine) written as weights over :data:`FEATURES`
FIXED_MIX: tuple[float, ...] = tuple(
    {"lexical": 0.3, "cosine_norm": 0.7}.get(f, 0.0) for f in FEATURES
)
#: how much of the fixed fusion's score is added to the learned score when ordering. The
#: ranker is fitted for the likelihood that its first tool is right, and alone it ranked
#: below the plain fusion at recall@5 on two dev sets; chosen on data (the largest worst
#: margin over the parts, leave-one-set-out, by benchmarks/quality.py)
BLEND = 4.0
#: fewer tools than this: the prior is kept (too few pseudo-queries to fit 9 numbers)
MIN_TOOLS = 12
#: the lexical lead: when a catalog's own pseudo-queries show the fitted ranker's recall@5
#: below BM25's by more than LEAD_MARGIN, the order adds LEAD × each candidate's BM25
#: relative to the query's best (BM25 leads, the ranker breaks its ties and near-ties).
#: LEAD is fixed by design (moderate: on the dev sets a lead of 8-16 gained toolbench
#: read whole but cost toolalpaca); the margin is chosen on data (leave-one-set-out over
#: the six dev sets, by benchmarks/quality.py), never on a catalog's evaluation queries
LEAD = 4.0
#: the "all" fit of benchmarks/quality.py (--limit 100): no dev set lost to the lead, so
#: the smallest margin of the grid: BM25 leads wherever the catalog's own evidence favours it
LEAD_MARGIN = 0.0


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
        """A stored calibration, or None when it is unreadable or of another version."""
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
        pw, pb = prior[: len(FEATURES)], prior[len(FEATURES)]
        w = tuple(p + (a - b) for p, a, b in zip(pw, self.weights, self.prior, strict=True))
        return w, pb + (self.none_bias - self.prior_none)

    def lean(self) -> str:
        w = dict(zip(FEATURES, self.weights, strict=True))
        lex = abs(w["lexical"]) + abs(w["lexical_rank"])
        dense = abs(w["cosine"]) + abs(w["cosine_norm"]) + abs(w["cosine_gap"])
        ratio = dense / max(lex + dense, 1e-9)
        return "dense" if ratio > 0.65 else "lexical" if ratio < 0.35 else "balanced"


# -- the field texts the overlap features read -------------------------------------------
@dataclass(frozen=True, slots=True)
class FieldTerms:
    """Per tool: the stemmed terms of its name and summary (cards only, no schemas)."""

    name: Mapping[str, frozenset[str]]
    summary: Mapping[str, frozenset[str]]
    #: the canonical form (:func:`phrase_key`) of each tool's id and name
    keys: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: the same two fields inverted: term -> the tools whose name (summary) holds it
    in_name: Mapping[str, frozenset[str]] = field(default_factory=dict)
    in_summary: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: each tool's summed name-term idf, as :func:`features` reads it, kept per idf function
    _name_idf: dict[str, tuple[Callable[[str], float], float]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def name_idf(self, tool_id: str, idf: Callable[[str], float]) -> float:
        """``sum(idf(t) for t in self.name[tool_id])``, computed once per tool and ``idf``
        (the same sum, in the same order: the same float)."""
        hit = self._name_idf.get(tool_id)
        if hit is not None and hit[0] is idf:
            return hit[1]
        total = sum(idf(t) for t in self.name[tool_id])
        self._name_idf[tool_id] = (idf, total)
        return total

    @classmethod
    def of(cls, cards: Iterable[CapabilityCard]) -> FieldTerms:
        name: dict[str, frozenset[str]] = {}
        summary: dict[str, frozenset[str]] = {}
        keys: dict[str, frozenset[str]] = {}
        for card in cards:
            name[card.id] = frozenset(terms(card.name))
            summary[card.id] = frozenset(terms(card.summary))
            keys[card.id] = frozenset((phrase_key(card.id), phrase_key(card.name)))
        return cls(name, summary, keys, _inverted(name), _inverted(summary))


def _inverted(field_terms: Mapping[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    for tool_id, ts in field_terms.items():
        for t in ts:
            out.setdefault(t, set()).add(tool_id)
    return {t: frozenset(ids) for t, ids in out.items()}


def _param_texts(spec: ToolSpec) -> list[str]:
    props = spec.parameters.get("properties", {}) if isinstance(spec.parameters, Mapping) else {}
    out: list[str] = []
    if isinstance(props, Mapping):
        for pname, pschema in props.items():
            out.append(str(pname))
            if isinstance(pschema, Mapping) and isinstance(pschema.get("description"), str):
                out.append(pschema["description"])
    return out


def idf_of(df: Mapping[str, int], n_docs: int) -> Callable[[str], float]:
    def idf(term: str) -> float:
        return math.log(1 + (n_docs + 1) / (df.get(term, 0) + 0.5))

    return idf


def features(
    query_terms: Sequence[str],
    lex: Hits,
    dense: Hits,
    fields: FieldTerms,
    idf: Callable[[str], float],
    parts: int = 0,
    *,
    shape: bool = False,
) -> tuple[list[str], Matrix]:
    """The candidate pool (lexical ∪ dense ids) and its feature matrix, one row a candidate:
    :data:`FEATURES`, then with ``shape`` :data:`SHAPE_FEATURES` (``parts``: how many parts
    the request is read in, :func:`parts.request_parts`)."""
    ids = list(dict.fromkeys([*lex.ids, *dense.ids]))
    width = len(FEATURES) + (len(SHAPE_FEATURES) if shape else 0)
    x = np.zeros((len(ids), width), dtype=np.float64)
    if not ids:
        return ids, x
    row = {t: i for i, t in enumerate(ids)}
    top = lex.scores[0] if lex.scores and lex.scores[0] > 0 else 1.0
    # whole columns at a time (the same IEEE divisions as one value at a time)
    if lex.ids:
        at = np.fromiter((row[t] for t in lex.ids), dtype=np.int64, count=len(lex.ids))
        x[at, 0] = np.asarray(lex.scores, dtype=np.float64) / top
        x[at, 1] = 1.0 / np.arange(1, len(at) + 1, dtype=np.float64)
    cos = np.full(len(ids), np.nan)
    if dense.ids:
        at = np.fromiter((row[t] for t in dense.ids), dtype=np.int64, count=len(dense.ids))
        cos[at] = dense.scores
        ranked = at[:POOL]
        x[ranked, 7] = 1.0 / np.arange(1, len(ranked) + 1, dtype=np.float64)
    if np.isfinite(cos).any():
        lo, hi = float(np.nanmin(cos)), float(np.nanmax(cos))
        cos = np.where(np.isfinite(cos), cos, lo)
        x[:, 2] = cos
        x[:, 3] = (cos - lo) / (hi - lo) if hi > lo else 1.0
        x[:, 4] = cos - hi
    x[:, 8] = x[:, 0] * x[:, 3]
    q = set(query_terms)
    weights = {t: idf(t) for t in q}
    total = sum(weights.values()) or 1.0
    # from the query's few terms to the pool's tools (most share no word with the query)
    pool = set(ids)
    named: dict[str, float] = {}
    summarised: dict[str, float] = {}
    for t, w in weights.items():
        for tid in fields.in_name.get(t, frozenset()) & pool:
            named[tid] = named.get(tid, 0.0) + w
        for tid in fields.in_summary.get(t, frozenset()) & pool:
            summarised[tid] = summarised.get(tid, 0.0) + w
    for tid, w in named.items():
        x[row[tid], 5] = w / fields.name_idf(tid, idf)
    for tid, w in summarised.items():
        x[row[tid], 6] = w / total
    if shape:
        _shape(x, q, weights, lex, dense, fields, idf, pool, row, parts)
    return ids, x


def _shape(
    x: Matrix,
    q: Set[str],
    weights: Mapping[str, float],
    lex: Hits,
    dense: Hits,
    fields: FieldTerms,
    idf: Callable[[str], float],
    pool: Set[str],
    row: Mapping[str, int],
    parts: int,
) -> None:
    """The :data:`SHAPE_FEATURES` columns (after :data:`FEATURES`), whole columns at a time."""
    at = len(FEATURES)
    rare_at = RARE_IDF_SHARE * idf("\x00")  # a term no tool has: the largest idf
    hits: dict[str, int] = {}
    for t, w in weights.items():
        if w >= rare_at:
            for tid in (
                fields.in_name.get(t, frozenset()) | fields.in_summary.get(t, frozenset())
            ) & pool:
                hits[tid] = hits.get(tid, 0) + 1
    if hits:
        rows = np.fromiter((row[t] for t in hits), dtype=np.int64, count=len(hits))
        x[rows, at] = np.minimum(np.fromiter(hits.values(), dtype=np.float64), RARE_CAP) / RARE_CAP
    long = min(len(q), LONG_TERMS) / LONG_TERMS
    top_lex, top_dense = set(lex.ids[:AGREE_AT]), set(dense.ids[:AGREE_AT])
    apart = 1.0 - len(top_lex & top_dense) / AGREE_AT
    x[:, at + 1] = x[:, 0] * long
    x[:, at + 2] = x[:, 1] * long
    x[:, at + 3] = x[:, 3] * long
    x[:, at + 4] = x[:, 0] * apart
    x[:, at + 5] = x[:, 3] * apart
    x[:, at + 6] = x[:, 0] * float(parts > 1)


def blended(weights: Sequence[float], blend: float) -> tuple[float, ...]:
    """``weights`` plus ``blend`` times the fixed fusion's weights (none on the
    :data:`SHAPE_FEATURES`, when ``weights`` holds them too)."""
    mix = (*FIXED_MIX, *(0.0,) * (len(weights) - len(FIXED_MIX)))
    return tuple(float(w) + blend * m for w, m in zip(weights, mix, strict=True))


def scores(x: Matrix, weights: Sequence[float]) -> npt.NDArray[np.float64]:
    out: npt.NDArray[np.float64] = x @ np.asarray(weights, dtype=np.float64)
    return out


#: the scale of the fixed fusion's and BM25's scores when one of them orders alone (the
#: held-out fits' blend: the scores relative to the best then spread as the blend's do)
ORDER_SCALE = 32.0


def ordered(
    x: Matrix, weights: Sequence[float], blend: float, order: str = "ranker"
) -> npt.NDArray[np.float64]:
    """The score each candidate is put in order by (:data:`orders.ORDERS`): the learned
    score plus ``blend`` times the fixed fusion (``ranker``), that plus :data:`LEAD` times
    BM25 (``lead``), the fixed fusion alone (``fixed``), or BM25 with the learned score
    breaking its ties (``bm25``)."""
    if order == "fixed":
        return scores(x[:, : len(FIXED_MIX)], FIXED_MIX) * ORDER_SCALE
    s = scores(x, blended(weights, blend) if blend else weights)
    if order == "lead":
        return s + LEAD * x[:, 0]
    if order == "bm25":
        return s + ORDER_SCALE * x[:, 0]
    if order != "ranker":
        raise ValueError(f"unknown order {order!r}; expected one of {order_choice.ORDERS}")
    return s


def top_probability(s: npt.NDArray[np.float64], none_bias: float, top: int | None = None) -> float:
    """P(candidate ``top`` is right) under the softmax with the none option (default: the
    best-scored candidate)."""
    if not len(s):
        return 0.0
    m = max(float(s.max()), none_bias)
    z = float(np.exp(s - m).sum()) + math.exp(none_bias - m)
    pick = float(s.max()) if top is None else float(s[top])
    return math.exp(pick - m) / z


def platt(p: float, a: float = PLATT[0], b: float = PLATT[1]) -> float:
    """The pseudo-query probability mapped onto real requests (clipped logit, then σ)."""
    p = min(max(p, 1e-6), 1 - 1e-6)
    return 1.0 / (1.0 + math.exp(-(a * math.log(p / (1 - p)) + b)))


# -- pseudo-queries ------------------------------------------------------------------------
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class Pseudo:
    text: str
    tool_id: str | None  # None: no tool is right (a mixture of several tools' words)
    kind: str


def pseudo_queries(specs: Sequence[ToolSpec], seed: int = SEED) -> list[Pseudo]:
    """Text about each sampled tool that is not its indexed text verbatim (seeded)."""
    rng = random.Random(seed)
    sample = list(specs)
    if len(sample) > SAMPLE_TOOLS:
        sample = rng.sample(sample, SAMPLE_TOOLS)
    out: list[Pseudo] = []
    for spec in sample:
        masked = set(words(spec.card.name)) | set(words(spec.id))
        summary = [w for w in spec.card.summary.split() if _bare(w) not in masked]
        if len(summary) >= 4:
            keep = sorted(rng.sample(range(len(summary)), max(3, len(summary) // 2)))
            out.append(Pseudo(" ".join(summary[i] for i in keep), spec.id, "summary"))
        params = [p for p in _param_texts(spec) if _bare(p) not in masked]
        described = [p for p in params if len(p.split()) > 1]
        if described:
            text = " ".join(rng.sample(described, min(2, len(described))))
            out.append(Pseudo(_masked(text, masked), spec.id, "params"))
        for alias in spec.card.aliases[:2]:
            out.append(Pseudo(alias, spec.id, "alias"))
    # mixtures of words from unrelated tools: no tool is right, so the none option learns
    n_none = max(len(out) // 8, 4)
    for _ in range(n_none):
        picks = rng.sample(list(specs), min(3, len(specs)))
        bag = [w for s in picks for w in s.card.summary.split()]
        rng.shuffle(bag)
        out.append(Pseudo(" ".join(bag[:8]) or "nothing", None, "none"))
    return out


def _bare(word: str) -> str:
    return " ".join(words(word))


def _masked(text: str, masked: Set[str]) -> str:
    return " ".join(w for w in text.split() if _bare(w) not in masked)


# -- the fit -------------------------------------------------------------------------------
@dataclass(slots=True)
class Example:
    x: Matrix
    target: int  # row of the right tool in x, or -1: none of the pool


def fit(
    examples: Sequence[Example],
    *,
    l2: float = L2,
    steps: int = STEPS,
    prior: Sequence[float] = PRIOR,
    prior_none: float = PRIOR_NONE,
    start: Sequence[float] | None = None,
    start_none: float | None = None,
) -> tuple[tuple[float, ...], float]:
    """Conditional logit over each pool plus a none option, by Adam on the mean log-loss,
    shrunk towards ``prior`` (L2 on the difference)."""
    w = np.asarray(prior if start is None else start, dtype=np.float64).copy()
    centre = np.asarray(prior, dtype=np.float64)
    b = float(prior_none if start_none is None else start_none)
    xs = [e.x for e in examples if len(e.x)]
    targets = [e.target for e in examples if len(e.x)]
    if not xs:
        return tuple(float(v) for v in w), b
    sizes = np.array([len(x) for x in xs])
    stacked = np.vstack(xs)
    owner = np.repeat(np.arange(len(xs)), sizes)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    tgt = np.array(targets)
    has = tgt >= 0
    tgt_rows = offsets[has] + tgt[has]
    params = np.concatenate([w, [b]])
    m = np.zeros_like(params)
    v = np.zeros_like(params)
    lr, beta1, beta2 = 0.05, 0.9, 0.999
    n = len(xs)
    for step in range(1, steps + 1):
        w, b = params[:-1], params[-1]
        s = stacked @ w
        mx = np.maximum(np.maximum.reduceat(s, offsets), b)
        e = np.exp(s - mx[owner])
        e_none = np.exp(b - mx)
        z = np.add.reduceat(e, offsets) + e_none
        p = e / z[owner]
        p_none = e_none / z
        # gradient of the mean negative log-likelihood
        grad_w = (p[:, None] * stacked).sum(axis=0) - stacked[tgt_rows].sum(axis=0)
        grad_b = p_none.sum() - float((~has).sum())
        grad = np.concatenate([grad_w, [grad_b]]) / n
        grad[:-1] += l2 * (params[:-1] - centre)
        m = beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad**2
        mhat = m / (1 - beta1**step)
        vhat = v / (1 - beta2**step)
        params = params - lr * mhat / (np.sqrt(vhat) + 1e-8)
    return tuple(float(x) for x in params[:-1]), float(params[-1])


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
    """
    began = time.perf_counter()
    prior = PRIOR if start is None else tuple(float(w) for w in start[: len(FEATURES)])
    prior_none = PRIOR_NONE if start is None else float(start[len(FEATURES)])
    if len(specs) < MIN_TOOLS:
        return Calibration(
            prior, prior_none, prior, prior_none, n_tools=len(specs), fingerprint=fingerprint(specs)
        )
    pseudo = pseudo_queries(specs, seed)
    multis = order_choice.multi_queries(specs, seed) if measure_orders else []
    texts = [p.text for p in pseudo] + [m.text for m in multis]
    every = retrieve(texts, embed(texts))
    runs, multi_runs = every[: len(pseudo)], every[len(pseudo) :]
    examples: list[Example] = []
    singles: dict[str, list[float]] = {"bm25": [], "dense": [], "ranker": []}
    for p, (qterms, lex, dense) in zip(pseudo, runs, strict=True):
        ids, x = features(qterms, lex, dense, fields, idf)
        target = ids.index(p.tool_id) if p.tool_id is not None and p.tool_id in ids else -1
        examples.append(Example(x, target))
    # hold out every 5th example to report the fitted ranker's pseudo recall honestly
    train = [e for i, e in enumerate(examples) if i % 5]
    weights, none_bias = fit(train, prior=prior, prior_none=prior_none)
    for i, (p, (_, lex, dense), ex) in enumerate(zip(pseudo, runs, examples, strict=True)):
        if p.tool_id is None or i % 5:
            continue
        singles["bm25"].append(float(p.tool_id in lex.ids[:5]))
        singles["dense"].append(float(p.tool_id in dense.ids[:5]))
        hit = ex.target >= 0 and ex.target in np.argsort(-scores(ex.x, weights))[:5]
        singles["ranker"].append(float(hit))
    held = [
        (ex.x, (ex.target,) if ex.target >= 0 else ())
        for i, (p, ex) in enumerate(zip(pseudo, examples, strict=True))
        if i % 5 == 0 and p.tool_id is not None
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


# -- the ranker discovery uses -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Ranker:
    """Scores a retrieval pool with the catalog's weights; the confidence comes with it.

    The order adds ``blend`` times the fixed fusion to the fitted score; the probability
    that the first is right is the fitted model's (the blend only reorders: the fixed mix,
    relative to the pool's best, cannot tell a pool of strangers from a good match).
    """

    weights: tuple[float, ...]
    none_bias: float
    fields: FieldTerms
    idf: Callable[[str], float]
    platt: tuple[float, float] = PLATT
    blend: float = 0.0
    #: the weight of BM25 (relative to the query's best) added to the order (0: no lead)
    lead: float = 0.0
    #: read :data:`SHAPE_FEATURES` too (``weights`` then holds one weight for each); off by
    #: default: they did not win held out (docs/benchmarks.md)
    shape: bool = False
    #: the order (:func:`ordered`) of a request read whole, and of one read in several parts
    orders: tuple[str, str] = ("ranker", "ranker")
    #: the safety floor: below this probability that its first is right, the pool takes
    #: the fixed fusion's order (0: never; :data:`orders.FLOOR`)
    floor: float = 0.0

    def rank(
        self, query_terms: Sequence[str], lex: Hits, dense: Hits, parts: int = 0
    ) -> tuple[list[tuple[str, float, float, float]], float]:
        """(id, score relative to the best in (0, 1], lexical, cosine) best first, and the
        calibrated probability that the first is right (``parts``: how many parts the
        request is read in)."""
        ids, x = features(query_terms, lex, dense, self.fields, self.idf, parts, shape=self.shape)
        if not ids:
            return [], 0.0
        s = scores(x, self.weights)
        r = ordered(x, self.weights, self.blend, self.orders[1 if parts > 1 else 0])
        if self.lead:
            r = r + self.lead * x[:, 0]
        order = np.argsort(-r, kind="stable")
        p = platt(top_probability(s, self.none_bias, int(order[0])), *self.platt)
        if p < self.floor:  # unsure: the fixed fusion orders (the probability is still s's)
            r = ordered(x, self.weights, self.blend, "fixed")
            order = np.argsort(-r, kind="stable")
            p = platt(top_probability(s, self.none_bias, int(order[0])), *self.platt)
        best = float(r[order[0]])
        rs, lexical, cosine = r.tolist(), x[:, 0].tolist(), x[:, 2].tolist()
        ranked = [(ids[i], math.exp(rs[i] - best), lexical[i], cosine[i]) for i in order.tolist()]
        return ranked, p


# -- the confidence a shortlist reports ----------------------------------------------------
#: the inputs of the final confidence, all cheap and catalog-independent, in column order
CONFIDENCE_INPUTS: tuple[str, ...] = (
    "bias",
    "logit",  # logit of the ranker's (Platt-scaled) probability that its top is right
    "shown_gap",  # log(fused) of the shown top: 0 when it is the ranker's top, < 0 when not
    "exact",  # the shown top is an exact mention of a tool's id, name or alias
    "exact_ident",  # ... written as an identifier (`find_order`, `findOrder`): unambiguous
    "exact_idf",  # ... times the mean rarity (normalised idf) of the tool's name terms
    "exact_words",  # ... times min(words in its name, 4) / 4
    "exact_agrees",  # ... and the ranker put the same tool first
    "mentions",  # log(1 + tools mentioned exactly): several mentions, less sure which
    "margin",  # the ranker's score gap between its top two, / 8 (capped at 1)
    "cosine",  # the shown top's dense cosine to the query
    "cosine_lead",  # its cosine minus the best cosine among the ranker's first ten
    "lexical",  # its BM25 relative to the query's best BM25
    "words",  # log(1 + the query's content terms) / 3: long requests are vaguer
)
#: the logistic model of "the shown top tool is right" over :data:`CONFIDENCE_INPUTS`;
#: chosen on data (the five dev sets, leave-one-set-out in benchmarks/quality.py): the
#: weights shared, the bias the median of the sets' own (``fit_confidence(groups=)``), and
#: requests no tool serves weighing a tenth of each set
CONFIDENCE: tuple[float, ...] = (
    -1.8901, 0.6824, 0.2955, -0.0302, 0.2543, -0.0525, 0.2587,
    -0.2304, -0.1703, 1.0041, 1.3658, 0.1318, -0.2950, 2.0514,
)  # fmt: skip


class Scored(Protocol):
    """What the confidence reads of a candidate (``search.Candidate``)."""

    id: str
    fused: float
    exact: str
    lexical: float
    dense: float


def sigmoid(z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """σ element-wise, as :func:`confidence` computes it (the logit clipped to ±30)."""
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))


def _logit(p: float, eps: float = 1e-4) -> float:
    p = min(max(p, eps), 1 - eps)
    return math.log(p / (1 - p))


def confidence_inputs(
    query: str,
    query_terms: Sequence[str],
    ranked: Sequence[Scored],
    probability: float,
    shown: Sequence[Scored],
    exact: Mapping[str, str],
    fields: FieldTerms,
    idf: Callable[[str], float],
) -> list[float]:
    """The inputs of :func:`confidence` for one shortlist.

    ``ranked`` is the retrieval's ranking (fused score relative to its best, as the
    learned ranker gives it), ``probability`` its calibrated chance that its first is
    right, ``shown`` the shortlist in order (exact mentions first), ``exact`` every tool
    mentioned verbatim. Nothing here depends on which catalog it is.
    """
    x = [0.0] * len(CONFIDENCE_INPUTS)
    x[0] = 1.0
    x[1] = _logit(probability)
    if not shown:
        return x
    top = shown[0]
    x[2] = max(math.log(top.fused), -8.0) if top.fused > 0 else -8.0
    if top.exact:
        x[3] = 1.0
        keys = fields.keys.get(top.id) or {phrase_key(top.id)}
        names = fields.name.get(top.id, frozenset())
        x[4] = float(any(phrase_key(tok) in keys for tok in identifiers(query)))
        top_idf = idf("\x00")  # a term no tool has: the largest idf in this catalog
        x[5] = sum(idf(t) for t in names) / (len(names) * top_idf) if names else 0.0
        x[6] = min(len(names), 4) / 4
        x[7] = float(bool(ranked) and ranked[0].id == top.id)
    x[8] = math.log(1 + len(exact))
    if len(ranked) >= 2 and ranked[1].fused > 0:
        x[9] = min(-math.log(min(ranked[1].fused / max(ranked[0].fused, 1e-12), 1.0)) / 8, 1.0)
    elif ranked:
        x[9] = 1.0
    x[10] = top.dense
    x[11] = top.dense - max((c.dense for c in ranked[:10]), default=top.dense)
    x[12] = top.lexical
    x[13] = math.log(1 + len(query_terms)) / 3
    return x


def confidence(
    inputs: Sequence[float], model: Sequence[float] | None = None, shift: float = 0.0
) -> float:
    """The estimated probability that the shown top tool is right (σ of a linear model).

    ``shift`` is the catalog's own correction of the bias, learned from its discovery log
    (:func:`fit_shift`; 0 until one is accepted)."""
    w = CONFIDENCE if model is None else model
    z = sum(a * b for a, b in zip(w, inputs, strict=True)) + shift
    return 1.0 / (1.0 + math.exp(-min(max(z, -30.0), 30.0)))


#: the largest correction :func:`fit_shift` returns, in logits (a factor of e**4 ≈ 55 in odds)
MAX_SHIFT = 4.0
#: the prior on the correction: normal around 0 with this deviation (few outcomes, small move)
SHIFT_PRIOR_SD = 1.0
#: the store meta key of a catalog's :class:`ConfidenceShift`
SHIFT_META = "confidence.shift"


@dataclass(frozen=True, slots=True)
class ConfidenceShift:
    """A catalog's correction of the confidence bias, learned from its discovery log."""

    shift: float = 0.0  # in logits, added to the shared model's
    outcomes: int = 0  # logged discoveries it was fitted on (summed over acceptances)
    ts: float = 0.0  # when it was accepted (0: never); the log before it is not reused

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, raw: str | None) -> ConfidenceShift:
        """The stored correction; none (0) when missing or unreadable."""
        if not raw:
            return cls()
        try:
            d = json.loads(raw)
            out = cls(float(d["shift"]), int(d["outcomes"]), float(d["ts"]))
        except (ValueError, TypeError, KeyError, AttributeError):
            return cls()
        return out if math.isfinite(out.shift) and abs(out.shift) <= MAX_SHIFT else cls()


def fit_shift(confidences: Sequence[float], right: Sequence[bool]) -> float:
    """The one-number correction that makes logged confidences match how often the first
    tool shown turned out right: the δ maximising Σ log-likelihood of σ(logit(c) + δ), with
    a normal prior of deviation :data:`SHIFT_PRIOR_SD` (Newton steps; within ±MAX_SHIFT).

    Only the bias moves, so the order of requests by confidence is kept; what the shared
    model cannot know (this catalog's base rate) is what the log tells."""
    if len(confidences) != len(right):
        raise ValueError("one outcome per confidence is needed")
    if not confidences:
        return 0.0
    z = np.array([_logit(float(c)) for c in confidences])
    y = np.array([1.0 if r else 0.0 for r in right])
    prec = 1.0 / SHIFT_PRIOR_SD**2
    delta = 0.0
    for _ in range(50):
        p = sigmoid(z + delta)
        grad = float((p - y).sum()) + prec * delta
        hess = float((p * (1 - p)).sum()) + prec
        step = grad / hess
        delta = min(max(delta - step, -MAX_SHIFT), MAX_SHIFT)
        if abs(step) < 1e-9:
            break
    return round(delta, 4)


def fit_confidence(
    x: Matrix,
    right: npt.NDArray[np.float64],
    weight: npt.NDArray[np.float64],
    l2: float = 1e-3,
    groups: npt.NDArray[np.int64] | None = None,
) -> tuple[float, ...]:
    """The logistic model of :func:`confidence`: rows of :func:`confidence_inputs`, whether
    the shown top was right, and each row's weight (Newton steps; the bias is not shrunk).

    With ``groups`` (one catalog number per row) each catalog gets its own bias and the
    other weights are shared; the bias returned is the median of the catalogs' biases. A
    catalog's base rate is not something its inputs can show (in a hub of near-identical
    models the first tool is rarely *the* gold one, however good the match), so one
    such catalog would otherwise pull every other catalog's confidence towards its own.
    """
    if groups is None:
        return _fit_logistic(x, right, weight, l2, 1)
    names, index = np.unique(groups, return_inverse=True)
    onehot = np.zeros((len(index), len(names)))
    onehot[np.arange(len(index)), index] = 1.0
    beta = _fit_logistic(np.hstack([onehot, x[:, 1:]]), right, weight, l2, len(names))
    bias = float(np.median(beta[: len(names)]))
    return (round(bias, 4), *beta[len(names) :])


def _fit_logistic(
    x: Matrix,
    right: npt.NDArray[np.float64],
    weight: npt.NDArray[np.float64],
    l2: float,
    free: int,
) -> tuple[float, ...]:
    """Weighted logistic regression by Newton steps; the first ``free`` columns not shrunk."""
    w = weight / weight.sum()
    beta = np.zeros(x.shape[1])
    shrink = np.full(x.shape[1], l2)
    shrink[:free] = 0.0
    for _ in range(50):
        p = sigmoid(x @ beta)
        grad = x.T @ (w * (p - right)) + shrink * beta
        hess = (x * (w * p * (1 - p))[:, None]).T @ x + np.diag(shrink) + 1e-9 * np.eye(len(beta))
        step = np.linalg.solve(hess, grad)
        beta = beta - step
        if float(np.abs(step).max()) < 1e-9:
            break
    return tuple(round(float(b), 4) for b in beta)
