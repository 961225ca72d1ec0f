"""benchmarks/skip_confidence.py and encoder_skip.py: the skipped rankings' confidence is
fitted on the other sets only, on sets with enough skipped requests, and the skip's
complete@5 is scored beside its recall@5 (synthetic rows; nothing of the dev sets)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import encoder_skip  # noqa: E402
import skip_confidence  # noqa: E402
from toolscout.discovery.confidence import CONFIDENCE_INPUTS, DENSE_INPUTS  # noqa: E402


def _rows(rng: np.random.Generator, skipped: int, others: int, base: float) -> list[dict[str, Any]]:
    """A set's rows: ``skipped`` requests the rule skipped (right with a chance rising with
    the ranker's logit, around ``base``), then ``others`` it did not."""
    out: list[dict[str, Any]] = []
    for _ in range(skipped):
        x = [1.0, float(rng.normal()), 0.0, 1.0, float(rng.random() < 0.5), 0.5, 0.5, 1.0,
             math.log(2), 0.3, 0.0, 0.0, 1.0, 0.5]  # fmt: skip
        right = bool(rng.random() < 1 / (1 + math.exp(-(base + 1.5 * x[1]))))
        out.append({"skip": "exact", "xs": x, "rs": right, "conf": 0.5, "right": right,
                    "exact": True, "hybrid": 1.0, "lexical": 1.0 if right else 0.5})  # fmt: skip
    out += [{"conf": 0.6, "right": True, "exact": False, "hybrid": 1.0, "lexical": 1.0}] * others
    return out


def test_the_fit_leaves_the_held_out_set_and_thin_sets_out() -> None:
    rng = np.random.default_rng(3)
    per_set = {
        "a": _rows(rng, 400, 100, 0.5),
        "b": _rows(rng, 400, 100, 0.0),
        "c": _rows(rng, 400, 100, -0.5),
        "thin": _rows(rng, skip_confidence.MIN_SKIPPED - 1, 100, 3.0),
    }
    model, used = skip_confidence.fit_without(per_set, {}, "a")
    assert used == ["b", "c"]  # not the held-out set, not the thin one
    assert model is not None and len(model) == len(CONFIDENCE_INPUTS)
    for name in DENSE_INPUTS:
        assert model[CONFIDENCE_INPUTS.index(name)] == 0.0
    assert model[1] > 0.8  # the ranker's logit still counts
    everything, on = skip_confidence.fit_without(per_set, {}, None)
    assert on == ["a", "b", "c"] and everything != model
    # nothing to fit on: no model, said plainly
    assert skip_confidence.fit_without({"thin": per_set["thin"]}, {}, None) == (None, [])


def test_skipped_no_tool_requests_pull_the_confidence_down() -> None:
    rng = np.random.default_rng(4)
    per_set = {n: _rows(rng, 300, 100, 0.5) for n in ("a", "b")}
    named = [[1.0, 0.0, 0.0, 1.0, 0.0, 0.5, 0.5, 1.0, math.log(2), 0.3, 0.0, 0.0, 1.0, 0.5]]
    no_tool = {n: {"requests": 2, "xs": named * 2} for n in per_set}
    plain, _ = skip_confidence.fit_without(per_set, {}, None)
    wary, _ = skip_confidence.fit_without(per_set, no_tool, None)
    assert plain is not None and wary is not None
    x = np.array(named[0])
    assert float(x @ np.array(wary)) < float(x @ np.array(plain))


def test_whole_set_reads_the_skipped_confidence_where_the_rule_skipped() -> None:
    rows: list[dict[str, Any]] = [
        {"conf": 0.9, "right": True},
        {"conf": 0.2, "right": False, "skip": "exact", "xs": [0.0] * 14, "rs": True},
        {"conf": None, "right": None},  # nothing shown: left out
    ]
    assert skip_confidence.whole_set(rows, None) == [(0.9, True), (0.2, False)]
    assert skip_confidence.whole_set(rows, [0.7]) == [(0.9, True), (0.7, True)]


def test_the_skip_is_scored_on_complete_at_5_too() -> None:
    rows = [
        {"exact": True, "hybrid": 1.0, "lexical": 0.5, "hits": 3, "margin": 0.1},
        {"exact": False, "hybrid": 1.0, "lexical": 1.0, "hits": 3, "margin": 0.1},
        {"exact": True, "hybrid": 0.5, "lexical": 0.5, "hits": 3, "margin": 0.1},
        {"exact": True, "hybrid": 1.0, "lexical": 1.0, "hits": 3, "margin": 0.1, "led": True},
    ]
    got = encoder_skip.score(rows, on_exact=True, margin=None)
    assert got["share"] == 0.5  # the led request is never skipped
    assert got["loss"] == 0.5 / 4 and got["complete_loss"] == 1 / 4
    assert got["complete_hybrid"] == 3 / 4
