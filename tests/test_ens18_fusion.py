"""The second-encoder screen's fusion and leave-one-set-out choice (h/ens18, round
twenty-four), on synthetic lists: benchmarks/ens_screen.py reads these to make its table."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from ens_screen import (
    RRF_K,
    choose,
    dense_only,
    fine_best,
    fuse,
    held_out,
    oracle_switch,
    reach,
    set_scores,
    worst_margin,
)


def test_weight_zero_is_the_default_list_unchanged() -> None:
    default = ["a", "b", "c"]
    assert fuse(default, ["x", "y", "c"], 0.0) == default


def test_a_tool_both_lists_rank_moves_above_one_only_the_default_ranks() -> None:
    # c is third in the default and first in the second list: with any real vote it
    # passes b (second in the default alone) and a (first in the default alone) at w = 1
    assert fuse(["a", "b", "c"], ["c"], 1.0) == ["c", "a", "b"]
    # a small vote moves it above b only: 1/62 < 1/63 + 0.02/61 < 1/61
    assert fuse(["a", "b", "c"], ["c"], 0.02) == ["a", "c", "b"]


def test_a_tool_only_the_second_list_has_comes_after_the_default_at_a_small_weight() -> None:
    got = fuse(["a", "b"], ["x", "a"], 0.1)
    assert got[:2] == ["a", "b"] and got[2] == "x"
    # at w = 1 the second list's first equals the default's first in score; ties: the
    # default's order first
    assert fuse(["a"], ["x"], 1.0) == ["a", "x"]


def test_repeated_ids_count_once_at_their_first_rank() -> None:
    assert fuse(["a", "a", "b"], ["b", "b"], 0.0) == ["a", "b"]
    once = fuse(["a", "b"], ["b"], 1.0)
    twice = fuse(["a", "b"], ["b", "b"], 1.0)
    assert once == twice == ["b", "a"]


def test_scores_follow_the_reciprocal_rank_formula() -> None:
    # b: 1/(k+2) + w/(k+1); a: 1/(k+1) + w/(k+3). b leads exactly when w(1/(k+1) − 1/(k+3))
    # exceeds 1/(k+1) − 1/(k+2)
    k = RRF_K
    edge = (1 / (k + 1) - 1 / (k + 2)) / (1 / (k + 1) - 1 / (k + 3))
    assert fuse(["a", "b"], ["b", "c", "a"], edge * 0.99) == ["a", "b", "c"]
    assert fuse(["a", "b"], ["b", "c", "a"], edge * 1.01)[0] == "b"


@pytest.mark.parametrize(("w", "k"), [(-0.1, 60), (float("nan"), 60), (0.5, 0)])
def test_a_bad_weight_or_constant_is_refused_by_name(w: float, k: int) -> None:
    with pytest.raises(ValueError, match=r"weight|constant"):
        fuse(["a"], ["b"], w, k)


def test_set_scores_and_dense_only() -> None:
    lists = {
        "gold": [["c"], ["a", "x"]],
        "default": [["a", "b", "d", "e", "f", "c"], ["a", "b", "d", "e", "f"]],
        "e5": [["c"], ["x"]],
    }
    assert set_scores(lists, 0.0) == {"recall@5": 0.25, "complete@5": 0.0}
    # at w = 1 c (6th of the default, 1st of e5) and x (e5's 1st only) both enter the five
    assert set_scores(lists, 1.0) == {"recall@5": 1.0, "complete@5": 1.0}
    assert dense_only(lists) == {"recall@5": 0.75, "complete@5": 0.5}
    with pytest.raises(ValueError, match="no scorable query"):
        set_scores({"gold": [], "default": [], "e5": []}, 0.0)


def _table(rows: dict[str, dict[float, float]]) -> dict[str, dict[float, dict[str, float]]]:
    return {s: {w: {"recall@5": v, "complete@5": v} for w, v in by.items()}
            for s, by in rows.items()}  # fmt: skip


def test_the_fold_takes_the_best_worst_margin_and_the_smaller_weight_on_a_tie() -> None:
    table = _table({
        "p": {0.0: 0.50, 0.1: 0.52, 0.5: 0.60},
        "q": {0.0: 0.70, 0.1: 0.71, 0.5: 0.69},
        "r": {0.0: 0.80, 0.1: 0.81, 0.5: 0.81},
    })  # fmt: skip
    # over p and q: 0.1 gains on both (worst +0.01), 0.5 loses 0.01 on q
    assert choose(table, ["p", "q"]) == 0.1
    assert worst_margin(table, ["p", "q"], 0.5) == pytest.approx(-0.01)
    # over q and r: 0.1 worst +0.01; over p and r: 0.1 and 0.5 tie at +0.01 -> 0.1
    assert choose(table, ["p", "r"]) == 0.1
    held = held_out(table)
    assert held["r"]["w"] == 0.1 and held["r"]["recall@5 gain"] == pytest.approx(0.01)
    assert held["q"]["w"] == 0.1


def test_a_fold_where_every_weight_loses_somewhere_keeps_the_default() -> None:
    table = _table({
        "p": {0.0: 0.50, 0.2: 0.60},
        "q": {0.0: 0.70, 0.2: 0.69},
        "r": {0.0: 0.80, 0.2: 0.95},
    })  # fmt: skip
    assert held_out(table)["r"]["w"] == 0.0
    assert held_out(table)["r"]["recall@5 gain"] == 0.0
    # q held out: p and r both gain at 0.2, and it loses on q
    assert held_out(table)["q"] == {
        "w": 0.2, "fit_worst_margin": 0.1, "recall@5": 0.69, "complete@5": 0.69,
        "recall@5 gain": -0.01, "complete@5 gain": -0.01,
    }  # fmt: skip


def test_a_grid_without_the_default_or_a_fold_without_sets_is_refused() -> None:
    with pytest.raises(ValueError, match="w = 0"):
        choose(_table({"p": {0.1: 0.5}}), ["p"])
    with pytest.raises(ValueError, match="no set"):
        worst_margin(_table({"p": {0.0: 0.5}}), [], 0.0)


def test_the_oracle_switch_takes_each_querys_better_list() -> None:
    lists = {
        "gold": [["a"], ["x"], ["a", "x"]],
        "default": [["a"], ["a"], ["a"]],
        "e5": [["b"], ["x"], ["x"]],
    }
    assert oracle_switch(lists) == {"recall@5": pytest.approx(2.5 / 3), "complete@5": 2 / 3}


def test_reach_counts_gold_anywhere_in_either_list() -> None:
    lists = {
        "gold": [["a", "x"], ["y"]],
        "default": [["b", "a"], ["b"]],
        "e5": [["x"], ["z"]],
    }
    assert reach(lists) == {"default": 0.25, "default + e5": 0.5}


def test_the_fine_in_set_best_reports_the_smallest_best_weight_and_its_gain() -> None:
    # c is sixth in the default, e5's first: any weight on the grid above 0 lifts it into
    # the five (1/66 + 0.01/61 > 1/65 is false, so 0.01 does not; 0.02 does)
    lists = {"gold": [["c"]], "default": [["a", "b", "d", "e", "f", "c"]], "e5": [["c"]]}
    got = fine_best(lists)
    assert got == {"w": 0.02, "recall@5 gain": 1.0, "complete@5 gain": 1.0}
