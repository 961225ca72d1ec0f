"""benchmarks/quality.py: the held-out default is read with the lexical lead its own fold
chose, not the shipped margin the blend grid runs with (round twenty-three: the fold
without toolalpaca chooses margin 0 and leads it, which the held-out column had missed;
round twenty-four, h/joint18: the margin and that reading are made in one pass,
``fit_lead_margin`` over ``lead_evidence``'s readings)."""

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


def _fit() -> dict[str, Any]:
    return {"prior": [1.0, 2.0], "platt": [1.0, 0.0], "blend": 32.0, "dedupe_yield": 0.8}


def _grid() -> dict[str, Any]:
    return {"held_out": [0.5, 0.25], "held_out_margin": [0.0, 0.0, 0.0]}


def _read(recalls: list[float], completes: list[float] | None = None) -> Any:
    return (recalls, recalls if completes is None else completes)


def test_the_margin_and_the_held_out_lead_are_chosen_in_one_pass() -> None:
    assert pytest.approx(0.04) == LEAD_MARGIN  # the gaps below straddle the shipped margin
    # a set the fold leads where the grid (the shipped margin) did not, as toolalpaca:
    # no other set contradicts leading, so its fold takes the smallest margin
    gaps = {"leads": 0.036, "flat": 0.1, "quiet": -0.05}
    lists = {
        # (without, leading): each query's recall@5 and complete@5
        "leads": (_read([1.0, 0.0, 1.0, 0.0]), _read([1.0, 0.0, 0.5, 0.0], [1.0, 0.0, 0.0, 0.0])),
        "flat": (_read([1.0, 1.0, 1.0, 1.0]), _read([1.0, 1.0, 1.0, 1.0])),  # leading: no change
    }
    fits = {n: _fit() for n in [*gaps, "all"]}
    grid = {n: _grid() for n in gaps}
    parts = {n: [1.0, 0.0, 1.0, 0.0] for n in gaps}

    quality.fit_lead_margin(fits, grid, parts, gaps, lists)

    # without "leads" every margin ties: the smaller; with it, leading below 0.036 costs it
    assert {n: f["lead_margin"] for n, f in fits.items()} == {
        "leads": 0.0, "flat": 0.04, "quiet": 0.04, "all": 0.04,
    }  # fmt: skip
    assert grid["leads"]["held_out"] == [0.375, 0.25]
    assert grid["leads"]["held_out_lead"] == "leading"
    m, low, high = paired_interval([1.0, 0.0, 0.5, 0.0], parts["leads"])
    assert grid["leads"]["held_out_margin"] == [round(m, 4), round(low, 4), round(high, 4)]
    assert grid["leads"]["lead"] == {
        "pseudo_gap": 0.036, "recall@5 without": 0.5, "recall@5 leading": 0.375,
    }  # fmt: skip
    # "flat": the fold decides the lead as the grid ran it (no label), but its column is
    # read at the fold's final constants (its reading), not the grid's
    assert grid["flat"]["held_out"] == [1.0, 1.0] and "held_out_lead" not in grid["flat"]
    # "quiet" has no reading here: the grid's column stands
    assert grid["quiet"]["held_out"] == [0.5, 0.25] and "held_out_lead" not in grid["quiet"]
    assert grid["quiet"]["lead"] == {"pseudo_gap": -0.05}


def test_a_set_the_grid_led_and_its_fold_does_not_is_read_without_the_lead() -> None:
    gaps = {"stops": 0.05, "hurt": 0.045, "quiet": -0.05}
    lists = {
        "stops": (_read([1.0, 1.0, 1.0, 0.0]), _read([1.0, 1.0, 1.0, 0.0])),
        "hurt": (_read([1.0, 1.0, 1.0, 1.0]), _read([0.0, 1.0, 1.0, 1.0])),  # leading costs it one
    }
    fits = {n: _fit() for n in [*gaps, "all"]}
    grid = {n: _grid() for n in gaps}
    parts = {n: [1.0, 1.0, 0.0, 0.0] for n in gaps}

    quality.fit_lead_margin(fits, grid, parts, gaps, lists)

    assert fits["stops"]["lead_margin"] == 0.06  # the smallest margin that spares "hurt"
    assert grid["stops"]["held_out"] == [0.75, 0.75]
    assert grid["stops"]["held_out_lead"] == "not leading"
    assert fits["hurt"]["lead_margin"] == 0.0  # "stops" is indifferent: it leads, as shipped
    # it leads at its fold's margin as at the shipped one (no label), read at its reading
    assert "held_out_lead" not in grid["hurt"] and grid["hurt"]["held_out"] == [0.75, 0.75]


def test_a_set_that_cannot_lead_is_read_at_its_folds_final_constants() -> None:
    # round twenty-five (h/repro19): the grid ran with the Platt step fitted before the
    # blend; a set whose gap never reaches a margin has one reading, without the lead, made
    # at the fold's final constants, and its column and interval come from it
    gaps = {"never": -0.05, "other": 0.0}
    lists = {
        "never": (_read([1.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0]),),
        "other": (_read([0.0]),),
    }
    fits = {n: _fit() for n in [*gaps, "all"]}
    grid = {n: _grid() for n in gaps}
    parts = {"never": [1.0, 0.0, 0.0, 1.0], "other": [0.0]}

    quality.fit_lead_margin(fits, grid, parts, gaps, lists)

    assert grid["never"]["held_out"] == [0.75, 0.5]
    m, low, high = paired_interval([1.0, 1.0, 0.0, 1.0], parts["never"])
    assert grid["never"]["held_out_margin"] == [round(m, 4), round(low, 4), round(high, 4)]
    assert "held_out_lead" not in grid["never"]
    assert grid["never"]["lead"] == {"pseudo_gap": -0.05}  # no leading reading to report
    # every margin ties (no set can lead): the smallest
    assert fits["never"]["lead_margin"] == fits["all"]["lead_margin"] == 0.0


def test_the_held_out_text_names_the_sets_read_with_their_folds_lead() -> None:
    moved = {"toolalpaca": {"held_out_lead": "leading"}, "bfcl": {}}
    said = quality.lead_line(moved)
    assert "toolalpaca leading" in said and "bfcl" not in said
    assert "same as the shipped margin" in quality.lead_line({"bfcl": {}})
