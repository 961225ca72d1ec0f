"""The lexical lead's evidence cross-fitted (h/xfit18, round twenty-four).

Cross-fitted, the ranker's single-tool pseudo recall is read over every fold of the
pseudo-queries, each scored by a ranker fitted on the other four, instead of over the
held-out fifth alone. Not shipped: it was ``calibrate(cross_fit=True)`` behind
``calibrate.CROSS_FIT`` (False) until round twenty-five moved it to
benchmarks/catalog_evidence.py (``cross_fitted_recall``, h/shape19); the calibration reads
the fifth, and its weights are fitted as before."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from support import DISTINCT_TOOLS, embedder, fit_calibration, spec
from toolscout.discovery import calibrate as cal_mod
from toolscout.discovery.calibrate import Example
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.logit import PRIOR, PRIOR_NONE, STEPS, fit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from catalog_evidence import catalog_runs, cross_fitted_recall

TOOLS = DISTINCT_TOOLS


def _inputs(cat: Catalog) -> tuple[list[cal_mod.Pseudo], list[Any], list[Example]]:
    runs = catalog_runs(cat, multi=False)  # as the calibration runs them
    assert runs is not None
    return runs.pseudo, runs.runs, runs.examples


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Catalog]:
    path = tmp_path_factory.mktemp("xfit") / "c.db"
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        cat.add([spec(tid, summary) for tid, summary in TOOLS])
        yield cat


def test_the_weights_are_fitted_as_before_the_cross_fit(catalog: Catalog) -> None:
    # shipped: the fifth's evidence, on which LEAD_MARGIN was fitted; no switch to turn
    assert not hasattr(cal_mod, "CROSS_FIT")
    default = fit_calibration(catalog)
    # the procedure before the cross-fit, written out: fold 0 held out, then a warm start on all
    _, _, examples = _inputs(catalog)
    w0, b0 = fit([e for i, e in enumerate(examples) if i % 5], prior=PRIOR, prior_none=PRIOR_NONE)
    before = fit(
        examples, prior=PRIOR, prior_none=PRIOR_NONE, start=w0, start_none=b0, steps=STEPS // 3
    )
    assert (default.weights, default.none_bias) == before  # bit for bit


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
    read = catalog_runs(catalog, multi=False)
    assert read is not None
    on, off = cross_fitted_recall(read), fit_calibration(catalog).pseudo_recall
    for key in ("bm25", "dense", "ranker"):
        every = [float(r[key]) for r in rows]
        fifth = [float(r[key]) for r in rows if r["fold"] == 0]
        assert on[key] == round(sum(every) / len(every), 3)
        assert off[key] == round(sum(fifth) / len(fifth), 3)
    # a folds-of-one list scores the held-out fifth only
    assert {r["fold"] for r in cal_mod.single_hits(pseudo, runs, examples, alone[:1])} == {0}


def test_a_fold_with_no_examples_keeps_the_prior() -> None:
    got = cal_mod.fold_fits([Example(np.zeros((0, len(PRIOR))), -1)] * 3, PRIOR, PRIOR_NONE)
    assert got == [(tuple(PRIOR), PRIOR_NONE)] * 5
