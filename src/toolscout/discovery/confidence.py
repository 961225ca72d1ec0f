"""The confidence a shortlist reports: the probability that the shown first tool is right.

A logistic model (:data:`CONFIDENCE`) over a few cheap inputs that do not depend on the
catalog (:func:`confidence_inputs`): the logit of the ranker's probability that its top
is right, whether the shown first tool is an exact mention of a name or id and how
specific that mention is, how many tools were mentioned, the ranker's margin, the top's
cosine and BM25. An exact mention of a generic name is therefore not reported as
certain. :data:`CONFIDENCE` is chosen on evaluation data (:func:`fit_confidence`,
leave-one-set-out by ``benchmarks/quality.py``, docs/benchmarks.md). A ranking made
without the query encoder (discovery/skip.py) has no cosine to read, so it has a model of
its own, :data:`CONFIDENCE_SKIPPED` (:func:`fit_skipped_confidence`, leave-one-set-out by
``benchmarks/skip_confidence.py``). A catalog's own
correction of the bias (:class:`ConfidenceShift`, :func:`fit_shift`) is learned from its
discovery log and stored in its meta (:data:`SHIFT_META`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from toolscout.discovery.features import FieldTerms, Matrix
from toolscout.discovery.lexical import identifiers, phrase_key

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


#: the inputs a ranking made without the query encoder does not have (always 0 there)
DENSE_INPUTS: tuple[str, ...] = ("cosine", "cosine_lead")
#: the logistic model of "the shown top tool is right" for a ranking made without the query
#: encoder (the request named an entitled tool: discovery/skip.py), over the same
#: :data:`CONFIDENCE_INPUTS` with :data:`DENSE_INPUTS` weighing 0; chosen on data (the
#: skipped requests of the dev sets with at least 50 of them, bfcl, metatool and toolbench:
#: :func:`fit_skipped_confidence`, leave-one-set-out in benchmarks/skip_confidence.py; this
#: is the fit on all of them). Held out it is far closer than :data:`CONFIDENCE` read on a
#: skipped ranking, but not calibrated within a decile's 0.1 on every set
#: (docs/benchmarks.md, Skipping the query encoder)
CONFIDENCE_SKIPPED: tuple[float, ...] = (
    -1.4309, 0.7279, 0.4438, 0.0, 1.6378, 0.8715, 2.2659,
    -0.3032, -1.005, 1.8716, 0.0, 0.0, 0.4863, 1.1922,
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
    inputs: Sequence[float],
    model: Sequence[float] | None = None,
    shift: float = 0.0,
    *,
    encoder_skipped: bool = False,
) -> float:
    """The estimated probability that the shown top tool is right (σ of a linear model).

    ``model`` defaults to :data:`CONFIDENCE`, or :data:`CONFIDENCE_SKIPPED` for a ranking
    made without the query encoder (``encoder_skipped``). ``shift`` is the catalog's own
    correction of the bias, learned from its discovery log (:func:`fit_shift`; 0 until one
    is accepted); it applies to either model."""
    w = model if model is not None else CONFIDENCE_SKIPPED if encoder_skipped else CONFIDENCE
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


def fit_skipped_confidence(
    x: Matrix,
    right: npt.NDArray[np.float64],
    weight: npt.NDArray[np.float64],
    groups: npt.NDArray[np.int64],
    l2: float = 1e-3,
) -> tuple[float, ...]:
    """:data:`CONFIDENCE_SKIPPED` from rows of :func:`confidence_inputs` of rankings made
    without the encoder: :func:`fit_confidence` with a bias per catalog (the median
    returned) over every input but :data:`DENSE_INPUTS`, whose weights are 0."""
    if x.ndim != 2 or x.shape[1] != len(CONFIDENCE_INPUTS):
        raise ValueError(
            f"rows of the {len(CONFIDENCE_INPUTS)} confidence inputs are needed, "
            f"got shape {x.shape}"
        )
    if not len(x) == len(right) == len(weight) == len(groups):
        raise ValueError("one outcome, weight and group per row is needed")
    keep = [i for i, name in enumerate(CONFIDENCE_INPUTS) if name not in DENSE_INPUTS]
    beta = fit_confidence(x[:, keep], right, weight, l2, groups)
    out = [0.0] * len(CONFIDENCE_INPUTS)
    for i, b in zip(keep, beta, strict=True):
        out[i] = float(b)
    return tuple(out)


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
