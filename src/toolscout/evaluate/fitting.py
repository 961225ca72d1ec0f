"""Leave-one-set-out fitting of the ranker prior and the confidence scaling.

The learned ranker (:mod:`toolscout.discovery.calibrate`) starts from prior
weights; the confidence goes through a Platt step. Both are constants chosen
on data, so they are fitted here on the queries of *other* evaluation sets and
scored on the one held out: :func:`examples` turns a set's queries into ranker
examples through the product's own retrieval, :func:`fit_prior` fits on every
set but one, :func:`fit_platt` scales confidence on the same sets.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

import numpy as np

from toolscout.discovery.calibrate import (
    Example,
    FieldTerms,
    features,
    fit,
    scores,
    top_probability,
)
from toolscout.discovery.catalog import Catalog
from toolscout.evaluate.evalset import EvalQuery
from toolscout.evaluate.harness import eval_principal
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
    rng = random.Random(SEED)
    out: list[Example] = []
    for name in sorted(by_set):
        if name == held_out or not by_set[name]:
            continue
        pool = list(by_set[name])
        out += [pool[rng.randrange(len(pool))] for _ in range(PER_SET)]
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
) -> tuple[float, float]:
    """(a, b) so that σ(a·logit(p) + b) matches how often the top tool is right, on every
    set but ``held_out``."""
    z: list[float] = []
    y: list[float] = []
    for ex in _balanced(by_set, held_out):
        if not len(ex.x):
            continue
        s = scores(ex.x, weights)
        p = min(max(top_probability(s, none_bias), 1e-6), 1 - 1e-6)
        z.append(math.log(p / (1 - p)))
        y.append(float(ex.target >= 0 and int(np.argmax(s)) == ex.target))
    if not z:
        return 1.0, 0.0
    zz, yy = np.array(z), np.array(y)
    a, b = 1.0, 0.0
    for _ in range(2000):
        q = 1.0 / (1.0 + np.exp(-(a * zz + b)))
        a -= 0.5 * float(((q - yy) * zz).mean())
        b -= 0.5 * float((q - yy).mean())
    return round(a, 4), round(b, 4)
