"""The one per-catalog decision's evidence by its own noise (h/joint18, round twenty-four).

The screen (benchmarks/joint_screen.py) showed the hypothesis fails, so nothing in discovery
reads it; h/xfit18 moved the measurement and the rule out of the product into the screen.
These pin them, and ``evaluate.fitting.clustered_difference``, which the screens read."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from support import DISTINCT_TOOLS, embedder, fit_calibration, spec
from toolscout.discovery import calibrate as cal_mod
from toolscout.discovery.calibrate import Calibration
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.search import CALIBRATION_META
from toolscout.evaluate.fitting import clustered_difference as paired

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from joint_screen import JOINT_OPTIONS, evidence, joint_choice

TOOLS = DISTINCT_TOOLS


def test_paired_is_the_mean_and_its_cluster_robust_standard_error() -> None:
    # every query its own cluster: the usual sample SD over sqrt(n)
    mean, se, n = paired([1.0, 0.0, 0.0, 0.0], ["a", "b", "c", "d"])
    assert (mean, n) == (0.25, 4.0) and se == pytest.approx(0.25)
    # two queries of one tool are summed first: G/(G-1) · Σ_c (Σ d − mean)² / n²
    mean, se, n = paired([1.0, 1.0, 0.0, 0.0], ["a", "a", "b", "c"])
    assert mean == 0.5 and se == pytest.approx(math.sqrt(1.5 * 1.5 / 16))
    assert paired([], []) == [0.0, 0.0, 0.0]
    assert paired([0.5, 0.5], ["a", "a"])[1] == math.inf  # one cluster: never significant
    with pytest.raises(ValueError, match="3 differences but 2 cluster keys"):
        paired([1.0, 0.0, 0.0], ["a", "b"])


def test_the_choice_switches_only_past_z_standard_errors() -> None:
    low, lead = JOINT_OPTIONS
    evidence = {low: [0.03, 0.01, 100.0], lead: [0.05, 0.03, 100.0]}
    assert joint_choice(evidence, None) == "base"  # None: the decision is off
    assert joint_choice(evidence, 1.0) == lead  # both past it: the larger difference
    assert joint_choice(evidence, 1.96) == low  # only the smaller blend is past 1.96 SEs
    assert joint_choice(evidence, 2.58) == low
    assert joint_choice(evidence, 3.5) == "base"
    # no difference is never a reason to switch, even at z = 0; nor is missing evidence
    assert joint_choice({low: [0.0, 0.0, 50.0], lead: [-0.01, 0.01, 50.0]}, 0.0) == "base"
    assert joint_choice({}, 0.0) == "base"
    assert joint_choice({low: [0.02, math.inf, 4.0]}, 0.0) == "base"
    # a tie goes to the earlier option
    assert joint_choice({low: [0.02, 0.01, 9.0], lead: [0.02, 0.001, 9.0]}, 1.0) == low


def test_a_calibration_stored_with_the_evidence_is_refitted() -> None:
    cal = Calibration(fitted=True, n_tools=20, n_pseudo=30)
    older = json.loads(cal.to_json())
    assert "joint" not in older  # the product no longer stores it
    # as a tree of this round between db8932d and the move stored it (never released): the
    # unknown field is refused, not half read, so the catalog's next calibrate() fits again
    older["joint"] = {"lead@32": [0.1, 0.05, 40.0]}
    assert older["version"] == cal_mod.VERSION
    assert Calibration.from_json(json.dumps(older)) is None
    del older["joint"]
    assert Calibration.from_json(json.dumps(older)) == cal


def test_the_screen_measures_the_paired_evidence_as_the_calibration_did(tmp_path: Path) -> None:
    with Catalog.open(tmp_path / "c.db", embedder=embedder(), log=False) as cat:
        cat.add([spec(tid, summary) for tid, summary in TOOLS])
        stored = Calibration.from_json(cat.store.meta(CALIBRATION_META) or "")
        assert stored is not None and stored.fitted
        fifth = fit_calibration(cat)  # the joint evidence reads the fifth, as the product
        recall, joint, n_tools = evidence(cat, cal_mod.SEED)
    assert n_tools == len(TOOLS)
    assert recall == fifth.pseudo_recall  # the same pseudo-queries, runs and fold-0 fit
    for option in JOINT_OPTIONS:
        diff, se, n = joint[option]
        singles, multis = joint[f"single:{option}"], joint[f"multi:{option}"]
        assert n == singles[2] + multis[2] and singles[2] > 0 and multis[2] > 0
        pooled = (singles[0] * singles[2] + multis[0] * multis[2]) / n
        assert diff == pytest.approx(pooled, abs=1e-5) and -1.0 <= diff <= 1.0 and se >= 0.0
    gap = fifth.pseudo_recall["bm25"] - fifth.pseudo_recall["ranker"]
    assert joint["single:bm25-ranker"][0] == pytest.approx(gap, abs=2e-3)  # what LEAD read
