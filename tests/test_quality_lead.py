"""benchmarks/quality.py: the held-out default is read with the lexical lead its own fold
chose, not the shipped margin the blend grid runs with (round twenty-three: the fold
without toolalpaca chooses margin 0 and leads it, which the held-out column had missed)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality  # noqa: E402
from toolscout.discovery.ranker import LEAD_MARGIN  # noqa: E402
from toolscout.evaluate.fitting import paired_interval  # noqa: E402


def _fit(margin: float) -> dict[str, Any]:
    return {"prior": [1.0, 2.0], "platt": [1.0, 0.0], "blend": 32.0, "dedupe_yield": 0.8,
            "lead_margin": margin}  # fmt: skip


def _grid(gap: float) -> dict[str, Any]:
    return {
        "held_out": [0.5, 0.25],
        "held_out_margin": [0.0, 0.0, 0.0],
        "lead": {"pseudo_gap": gap},
    }


def test_a_set_whose_fold_decides_the_lead_otherwise_is_read_again(tmp_path: Path) -> None:
    assert pytest.approx(0.04) == LEAD_MARGIN  # the margins below straddle the shipped one
    fits = {
        "leads": _fit(0.0),  # gap 0.036 > 0 but not > 0.04: the fold leads, the grid did not
        "same": _fit(0.04),  # the fold's margin is the shipped one: nothing to read again
        "never": _fit(0.0),  # no lexical evidence above any margin
        "stops": _fit(0.06),  # gap 0.05 > 0.04 but not > 0.06: the grid led, the fold does not
    }
    grid = {
        "leads": _grid(0.036),
        "same": _grid(0.036),
        "never": _grid(-0.05),
        "stops": _grid(0.05),
    }
    parts = {n: [1.0, 0.0, 1.0, 0.0] for n in fits}
    stages = quality.Stages(tmp_path / "stages", limit=None)
    # what each regrid would measure, kept where the run finds it (no set is opened)
    again = {
        "leads": ([1.0, 0.0, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0]),
        "stops": ([1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]),
    }
    for name, lists in again.items():
        pair = [fits[name]["blend"], fits[name]["dedupe_yield"]]
        stages.get("lead-held-out", name, [fits[name], pair], lambda lists=lists: lists)
    sets = [tmp_path / n for n in fits]

    quality.lead_held_out(sets, tmp_path, None, None, fits, grid, parts, stages)

    assert grid["leads"]["held_out"] == [0.375, 0.25]
    assert grid["leads"]["held_out_lead"] == "leading"
    m, low, high = paired_interval(again["leads"][0], parts["leads"])
    assert grid["leads"]["held_out_margin"] == [round(m, 4), round(low, 4), round(high, 4)]
    assert grid["stops"]["held_out"] == [0.75, 0.75]
    assert grid["stops"]["held_out_lead"] == "not leading"
    for untouched in ("same", "never"):
        assert grid[untouched]["held_out"] == [0.5, 0.25]
        assert "held_out_lead" not in grid[untouched]


def test_the_held_out_text_names_the_sets_read_with_their_folds_lead() -> None:
    moved = {"toolalpaca": {"held_out_lead": "leading"}, "bfcl": {}}
    said = quality.lead_line(moved)
    assert "toolalpaca leading" in said and "bfcl" not in said
    assert "same as the shipped margin" in quality.lead_line({"bfcl": {}})
