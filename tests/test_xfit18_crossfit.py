"""The lexical lead's evidence cross-fitted (h/xfit18, round twenty-four).

With ``cross_fit`` (off as shipped: ``calibrate.CROSS_FIT``), ``calibrate.calibrate`` reads
the ranker's single-tool pseudo recall over every fold of the pseudo-queries, each scored
by a ranker fitted on the other four, instead of over the held-out fifth alone; the weights
it stores are fitted exactly as without it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from support import DISTINCT_TOOLS, embedder, fit_calibration, spec
from toolscout.discovery import calibrate as cal_mod
from toolscout.discovery.calibrate import CROSS_FIT, Example
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.logit import PRIOR, PRIOR_NONE, STEPS, fit
from toolscout.discovery.queryvectors import embed_keys
from toolscout.settings import SearchSettings

TOOLS = DISTINCT_TOOLS


def _inputs(cat: Catalog) -> tuple[list[cal_mod.Pseudo], list[Any], list[Example]]:
    retriever = cat.retriever(SearchSettings())
    specs = cat.specs()
    allowed = frozenset(s.id for s in specs)
    pseudo = cal_mod.pseudo_queries(specs, cal_mod.SEED)
    texts = [p.text for p in pseudo]
    runs = retriever.pools(texts, retriever._embed_all(embed_keys(texts), cache=False), allowed)
    fields, idf = retriever.phrases.fields, retriever.phrases.idf
    return pseudo, runs, cal_mod.pseudo_examples(pseudo, runs, fields, idf)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Catalog]:
    path = tmp_path_factory.mktemp("xfit") / "c.db"
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        cat.add([spec(tid, summary) for tid, summary in TOOLS])
        yield cat


def test_the_weights_are_fitted_as_before_the_cross_fit(catalog: Catalog) -> None:
    assert CROSS_FIT is False  # shipped: the fifth's evidence, on which LEAD_MARGIN was fitted
    on, off, default = (
        fit_calibration(catalog, True),
        fit_calibration(catalog, False),
        fit_calibration(catalog, None),
    )
    # the procedure before the cross-fit, written out: fold 0 held out, then a warm start on all
    _, _, examples = _inputs(catalog)
    w0, b0 = fit([e for i, e in enumerate(examples) if i % 5], prior=PRIOR, prior_none=PRIOR_NONE)
    before = fit(
        examples, prior=PRIOR, prior_none=PRIOR_NONE, start=w0, start_none=b0, steps=STEPS // 3
    )
    for cal in (on, off, default):
        assert (cal.weights, cal.none_bias) == before  # bit for bit
    assert default.pseudo_recall == off.pseudo_recall
    assert on.blend_recall == off.blend_recall and on.orders == off.orders


def test_every_single_tool_pseudo_query_is_scored_by_a_ranker_that_did_not_see_it(
    catalog: Catalog,
) -> None:
    pseudo, runs, examples = _inputs(catalog)
    # each fold's ranker fitted on its own, by logit.fit, on the examples of the other folds
    alone = [
        fit([e for i, e in enumerate(examples) if i % 5 != k], prior=PRIOR, prior_none=PRIOR_NONE)[
            0
        ]
        for k in range(5)
    ]
    fitted = [w for w, _ in cal_mod.fold_fits(examples, PRIOR, PRIOR_NONE)]
    assert fitted == alone
    assert [w for w, _ in cal_mod.fold_fits(examples, PRIOR, PRIOR_NONE, 1)] == alone[:1]
    assert len(set(alone)) == 5  # each fold's ranker is its own
    rows = cal_mod.single_hits(pseudo, runs, examples, alone)
    singles = [i for i, p in enumerate(pseudo) if p.tool_id is not None]
    assert len(rows) == len(singles) and {r["fold"] for r in rows} == set(range(5))
    assert rows == cal_mod.single_hits(pseudo, runs, examples, fitted)
    for i, r in zip(singles, rows, strict=True):
        ex = examples[i]
        top = np.argsort(-cal_mod.scores(ex.x, alone[i % 5]))[:5]
        assert r["ranker"] == float(ex.target >= 0 and ex.target in top)
    on, off = fit_calibration(catalog, True), fit_calibration(catalog, False)
    for key in ("bm25", "dense", "ranker"):
        every = [float(r[key]) for r in rows]
        fifth = [float(r[key]) for r in rows if r["fold"] == 0]
        assert on.pseudo_recall[key] == round(sum(every) / len(every), 3)
        assert off.pseudo_recall[key] == round(sum(fifth) / len(fifth), 3)
    # a folds-of-one list scores the held-out fifth only
    assert {r["fold"] for r in cal_mod.single_hits(pseudo, runs, examples, alone[:1])} == {0}


def test_a_fold_with_no_examples_keeps_the_prior() -> None:
    got = cal_mod.fold_fits([Example(np.zeros((0, len(PRIOR))), -1)] * 3, PRIOR, PRIOR_NONE)
    assert got == [(tuple(PRIOR), PRIOR_NONE)] * 5
