"""benchmarks/quality_ship.py: the rule a refit ships by (no set loses more than 0.005 of
recall@5 or complete@5, in-set, against the shipped constants), and the in-set column a
--fits-only result's tables take from it."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality  # noqa: E402
import quality_ship  # noqa: E402


def test_the_difference_is_the_refit_minus_the_shipped_per_metric() -> None:
    shipped = ([1.0, 0.0, 1.0, 1.0], [1.0, 0.0, 0.0, 1.0])
    refit = ([1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0])
    got = quality_ship.compare(shipped, refit)
    assert got["n"] == 4
    assert got["recall@5"]["shipped"] == 0.75 and got["recall@5"]["refit"] == 1.0
    assert got["recall@5"]["diff"][0] == 0.25
    assert got["complete@5"]["diff"][0] == -0.25
    low, high = got["recall@5"]["diff"][1:]
    assert 0.0 <= low <= 0.25 <= high


def _set(recall: float, complete: float) -> dict[str, object]:
    return {
        "recall@5": {"shipped": 0.8, "refit": 0.8 + recall, "diff": [recall, -1.0, 1.0]},
        "complete@5": {"shipped": 0.7, "refit": 0.7 + complete, "diff": [complete, -1.0, 1.0]},
    }


def test_a_refit_ships_only_when_no_set_loses_more_than_the_allowance() -> None:
    assert quality_ship.verdict({"bfcl": _set(0.02, 0.0), "metatool": _set(-0.005, -0.004)}) == []
    broken = quality_ship.verdict({"bfcl": _set(0.02, 0.01), "toolbench": _set(0.0, -0.0051)})
    assert len(broken) == 1 and broken[0].startswith("toolbench complete@5 -0.0051")
    # a gain elsewhere does not buy a loss on one set
    assert quality_ship.verdict({"a": _set(0.1, 0.1), "b": _set(-0.006, 0.0)}) != []


def test_the_in_set_column_of_a_fits_only_result_comes_from_the_ship_check() -> None:
    grid = {
        "bfcl": {
            "parts": {"bm25": [0.79, 0.77], "dense": [0.8, 0.78], "hybrid-fixed": [0.84, 0.82]},
            "held_out": [0.85, 0.83],
        }
    }
    without = quality.reports_from_grid(grid)
    assert "hybrid" not in without["bfcl"]["strategies"]
    assert "| – | **0.850 / 0.830** |" in "\n".join(quality.goal_table(without))
    withit = quality.reports_from_grid(grid, {"bfcl": [0.859, 0.84]})
    assert "| 0.859 / 0.840 | **0.850 / 0.830** |" in "\n".join(quality.goal_table(withit))


def test_the_docs_say_whether_the_shipped_constants_are_the_fit_on_all_six() -> None:
    assert "fitted on all six" in quality.in_set_line(None)
    ships = {"command": "quality_ship.py", "sets": {}, "breaks": [], "max_loss": 0.005}
    assert "They are the fit on all six" in quality.in_set_line(ships)
    held = {**ships, "breaks": ["toolbench recall@5 -0.0100 (shipped 0.7060, refit 0.6960)"]}
    line = quality.in_set_line(held)
    assert "are not the fit on all six" in line and "toolbench recall@5 -0.0100" in line
    assert "does not ship" in line
