"""The conditional logit the learned ranker is: its prior weights and its fit.

A softmax over a retrieval pool plus a "none of these" option: one weight per feature
(:data:`features.FEATURES`) and a bias for the none option. :data:`PRIOR` is what every
catalog starts from (and keeps when it is too small to fit); :func:`fit` fits the weights
on a catalog's pseudo-queries (:class:`Example`: a pool's features and the right row) by
Adam on the mean log-loss, shrunk towards the prior, so the catalog itself decides how
much to trust each signal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolscout.discovery.features import Matrix

#: L2 penalty and steps of the fit
L2 = 0.3
STEPS = 300
#: the prior weights, used before a catalog is calibrated (or when it is too small to fit):
#: the conditional logit fitted on the five dev sets' queries (benchmarks/quality.py, which
#: also refits them with each set held out and reports both)
PRIOR: tuple[float, ...] = (2.9926, 0.0528, 2.6806, 1.7125, 3.8062, 1.1823, 1.3601, 0.6734, -1.2883)
PRIOR_NONE = 4.2753


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
    offset: Sequence[float] | None = None,
) -> tuple[tuple[float, ...], float]:
    """Conditional logit over each pool plus a none option, by Adam on the mean log-loss,
    shrunk towards ``prior`` (L2 on the difference). ``offset``: weights of a fixed score
    added to every candidate's and not fitted (the order's weights are fitted over the
    fixed fusion times the blend: they learn what the order needs on top of it)."""
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
    fixed = (
        stacked[:, : len(offset)] @ np.asarray(offset, dtype=np.float64)
        if offset is not None
        else np.zeros(len(stacked))
    )
    params = np.concatenate([w, [b]])
    m = np.zeros_like(params)
    v = np.zeros_like(params)
    lr, beta1, beta2 = 0.05, 0.9, 0.999
    n = len(xs)
    # the gradient's parts that do not change with the weights, summed once
    target_sum = stacked[tgt_rows].sum(axis=0)
    n_none = float((~has).sum())
    for step in range(1, steps + 1):
        w, b = params[:-1], params[-1]
        s = stacked @ w + fixed
        mx = np.maximum(np.maximum.reduceat(s, offsets), b)
        e = np.exp(s - mx[owner])
        e_none = np.exp(b - mx)
        z = np.add.reduceat(e, offsets) + e_none
        p = e / z[owner]
        p_none = e_none / z
        # gradient of the mean negative log-likelihood
        grad_w = (p[:, None] * stacked).sum(axis=0) - target_sum
        grad_b = p_none.sum() - n_none
        grad = np.concatenate([grad_w, [grad_b]]) / n
        grad[:-1] += l2 * (params[:-1] - centre)
        m = beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad**2
        mhat = m / (1 - beta1**step)
        vhat = v / (1 - beta2**step)
        params = params - lr * mhat / (np.sqrt(vhat) + 1e-8)
    return tuple(float(x) for x in params[:-1]), float(params[-1])
