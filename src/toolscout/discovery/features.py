"""The ranker's features: what it reads of one (request, candidate) pair.

Every candidate of a retrieval pool (the lexical ∪ dense ids) gets a few cheap numbers
(:data:`FEATURES`): its BM25 and its rank in the lexical list, its cosine and its rank
in the dense list, how much of its name and summary the request's terms hold (idf
weighted, from :class:`FieldTerms`, built from the cards alone). The columns
:data:`SHAPE_FEATURES` describe the request's shape, read per candidate; they are off
by default. The learned ranker (discovery/ranker.py) weighs these columns, calibration
(discovery/calibrate.py) fits the weights per catalog.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from toolscout.cards import CapabilityCard
from toolscout.discovery.lexical import phrase_key, terms
from toolscout.stores.base import Hits

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
#: bfcl 0.007 (benchmarks/ranker_features.py, docs/history/calibration.md "This round: per-query
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
#: the request names the tool's group: the idf share of the tool's group terms
#: (:attr:`FieldTerms.group`) found in the query, 0 for a tool without group terms; appended
#: after :data:`FEATURES` (and :data:`SHAPE_FEATURES`, when read) by ``features(group=True)``.
#: **Not used by the default**: fitted leave-one-set-out it raised toolbench held out (0.713
#: / 0.505 to 0.724 / 0.524) but cost toolalpaca 0.005 / 0.010 in-set, past the rule's 0.005
#: (benchmarks/group_feature.py, docs/history/calibration.md, round twenty). The product's
#: phrase index holds no group terms (``FieldTerms.of`` without ``group``, and a kept one,
#: discovery/keptparts.py): its FieldTerms.group is empty. Divided by the group's size
#: (:meth:`FieldTerms.group_size`) it kept toolbench's held-out gain (0.723 / 0.526) and
#: toolalpaca whole held out, but still cost toolalpaca one request in-set (round twenty-one)
GROUP_FEATURES: tuple[str, ...] = ("group",)
#: a query term is rare when its idf is at least this share of the catalog's largest idf
RARE_IDF_SHARE = 0.5
#: the rare-term count saturates here
RARE_CAP = 3
#: the query's length (distinct content terms) saturates here
LONG_TERMS = 24
#: the lexical and dense lists agree by the overlap of their first this many
AGREE_AT = 10
#: candidates per retriever in calibration (as many as the query-time pool)
POOL = 50


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
    #: each tool's stemmed group terms (:attr:`CapabilityCard.group`: a service, a server, an
    #: API's brand, a task category, a class), empty when the card has no group or every
    #: group term is already a name term (:func:`group_terms`), and the same inverted
    group: Mapping[str, frozenset[str]] = field(default_factory=dict)
    in_group: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: each tool's summed name-term idf, as :func:`features` reads it, kept per idf function
    _name_idf: dict[str, tuple[Callable[[str], float], float]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _group_idf: dict[str, tuple[Callable[[str], float], float]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _group_sizes: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def name_idf(self, tool_id: str, idf: Callable[[str], float]) -> float:
        """``sum(idf(t) for t in self.name[tool_id])``, computed once per tool and ``idf``
        (the same sum, in the same order: the same float)."""
        return _summed_idf(self._name_idf, self.name, tool_id, idf)

    def group_size(self, tool_id: str) -> int:
        """How many tools have ``tool_id``'s group terms (itself included; 1 for a tool
        without group terms), counted once per field set."""
        sizes = self._group_sizes
        if not sizes and self.group:
            count = Counter(self.group.values())
            sizes.update({t: count[g] for t, g in self.group.items()})
        return sizes.get(tool_id, 1)

    def group_idf(self, tool_id: str, idf: Callable[[str], float]) -> float:
        """``sum(idf(t) for t in self.group[tool_id])``, computed once per tool and ``idf``."""
        return _summed_idf(self._group_idf, self.group, tool_id, idf)

    @classmethod
    def of(cls, cards: Iterable[CapabilityCard], *, group: bool = False) -> FieldTerms:
        """The fields of ``cards``; their group terms only with ``group`` (the column that
        reads them is off by default, and a kept phrase index keeps none either)."""
        name: dict[str, frozenset[str]] = {}
        summary: dict[str, frozenset[str]] = {}
        keys: dict[str, frozenset[str]] = {}
        grouped_terms: dict[str, frozenset[str]] = {}
        for card in cards:
            name[card.id] = frozenset(terms(card.name))
            summary[card.id] = frozenset(terms(card.summary))
            keys[card.id] = frozenset((phrase_key(card.id), phrase_key(card.name)))
            grouped = group_terms(card.group, name[card.id]) if group else frozenset()
            if grouped:
                grouped_terms[card.id] = grouped
        return cls(
            name,
            summary,
            keys,
            _inverted(name),
            _inverted(summary),
            grouped_terms,
            _inverted(grouped_terms),
        )


def _summed_idf(
    kept: dict[str, tuple[Callable[[str], float], float]],
    field_terms: Mapping[str, frozenset[str]],
    tool_id: str,
    idf: Callable[[str], float],
) -> float:
    """``sum(idf(t) for t in field_terms[tool_id])``, kept in ``kept`` per tool for the
    last ``idf`` it was asked with (the same sum, in the same order: the same float)."""
    hit = kept.get(tool_id)
    if hit is not None and hit[0] is idf:
        return hit[1]
    total = sum(idf(t) for t in field_terms[tool_id])
    kept[tool_id] = (idf, total)
    return total


def group_terms(group: str, name_terms: Set[str]) -> frozenset[str]:
    """A tool's group as terms the request may name: the group's stemmed terms, or none
    when it has none or every one is already a term of the tool's name (a class that
    begins every method's name says nothing the name does not)."""
    out = frozenset(terms(group))
    return frozenset() if out <= name_terms else out


def _inverted(field_terms: Mapping[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    for tool_id, ts in field_terms.items():
        for t in ts:
            out.setdefault(t, set()).add(tool_id)
    return {t: frozenset(ids) for t, ids in out.items()}


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
    group: bool = False,
) -> tuple[list[str], Matrix]:
    """The candidate pool (lexical ∪ dense ids) and its feature matrix, one row a candidate:
    :data:`FEATURES`, then with ``shape`` :data:`SHAPE_FEATURES` (``parts``: how many parts
    the request is read in, :func:`parts.request_parts`), then with ``group``
    :data:`GROUP_FEATURES`."""
    ids = list(dict.fromkeys([*lex.ids, *dense.ids]))
    width = (
        len(FEATURES)
        + (len(SHAPE_FEATURES) if shape else 0)
        + (len(GROUP_FEATURES) if group else 0)
    )
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
    finite = np.isfinite(cos)
    some, every = bool(finite.any()), bool(finite.all())
    if some:
        if every:  # every candidate has a cosine (the usual pool): nanmin's value, no gap
            lo, hi = float(cos.min()), float(cos.max())
        else:
            lo, hi = float(np.nanmin(cos)), float(np.nanmax(cos))
            cos = np.where(finite, cos, lo)
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
    if group:
        _group(x, width - len(GROUP_FEATURES), weights, fields, idf, pool, row)
    return ids, x


def _group(
    x: Matrix,
    col: int,
    weights: Mapping[str, float],
    fields: FieldTerms,
    idf: Callable[[str], float],
    pool: Set[str],
    row: Mapping[str, int],
) -> None:
    """The "group" column (at ``col``): as the "name" column is computed, from the query's
    terms to the pool's tools whose group holds one."""
    if not fields.in_group:
        return
    grouped: dict[str, float] = {}
    for t, w in weights.items():
        for tid in fields.in_group.get(t, frozenset()) & pool:
            grouped[tid] = grouped.get(tid, 0.0) + w
    for tid, w in grouped.items():
        x[row[tid], col] = w / fields.group_idf(tid, idf)


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
