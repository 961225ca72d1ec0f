"""The routed second-encoder screen (h/route18, round twenty-four), on synthetic lists:
benchmarks/route_screen.py routes a query to the fusion only below a confidence threshold
and chooses (threshold, weight) leave-one-set-out."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from route_screen import (
    NONE,
    choose,
    held_confidence,
    held_out,
    mixture_quantile,
    routed_list,
    routed_oracle,
    set_scores,
    worst_margin,
)

# two queries: the default is right on the first (sure), wrong on the second (unsure),
# where e5's list has the gold first
LISTS = {
    "gold": [["a"], ["z"]],
    "default": [["a", "b", "c", "d", "e", "f"], ["b", "c", "d", "e", "f", "z"]],
    "e5": [["q", "r", "s", "t", "u", "v"], ["z", "y"]],
}


def test_a_sure_query_keeps_the_default_list_and_an_unsure_one_is_fused() -> None:
    default, second = LISTS["default"][1], LISTS["e5"][1]
    assert routed_list(default, second, 0.9, 0.5, 1.0) == default
    fused = routed_list(default, second, 0.1, 0.5, 1.0)
    assert fused[0] == "z" and fused != default


def test_a_query_at_the_threshold_is_not_routed() -> None:
    default, second = LISTS["default"][1], LISTS["e5"][1]
    assert routed_list(default, second, 0.5, 0.5, 2.0) == default


def test_a_confidence_outside_zero_one_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="confidence"):
        routed_list(["a"], ["b"], 1.5, 0.5, 1.0)
    with pytest.raises(ValueError, match="confidence"):
        routed_list(["a"], ["b"], float("nan"), 0.5, 1.0)


def test_routing_only_the_unsure_query_gains_and_counts_its_share() -> None:
    conf = [0.95, 0.1]
    base = set_scores(LISTS, conf, 0.0, 0.0)
    got = set_scores(LISTS, conf, 0.5, 2.0)
    assert base == {"recall@5": 0.5, "complete@5": 0.5, "routed": 0.0}
    assert got == {"recall@5": 1.0, "complete@5": 1.0, "routed": 0.5}
    # a threshold above both routes both: at w = 2 e5's first five (2/61..2/65 each) all
    # pass a (1/61), so the sure query loses what routing it alone would have kept
    both = set_scores(LISTS, conf, 0.99, 2.0)
    assert both == {"recall@5": 0.5, "complete@5": 0.5, "routed": 1.0}


def test_set_scores_refuses_a_confidence_count_that_does_not_match() -> None:
    with pytest.raises(ValueError, match="confidences for 2 queries"):
        set_scores(LISTS, [0.5], 0.5, 1.0)


def test_the_routed_oracle_only_switches_below_the_threshold() -> None:
    assert routed_oracle(LISTS, [0.95, 0.1], 0.5) == {"recall@5": 1.0, "complete@5": 1.0}
    assert routed_oracle(LISTS, [0.95, 0.9], 0.5) == {"recall@5": 0.5, "complete@5": 0.5}


Table = dict[str, dict[tuple[float, float], dict[str, float]]]


def _table(gains: dict[str, dict[tuple[float, float], float]]) -> Table:
    """Sets' grids from their recall gain per pair (complete@5 the same), no routing at 0.5;
    routed share: t itself (a larger threshold routes more)."""
    out: Table = {}
    for s, by in gains.items():
        out[s] = {NONE: {"recall@5": 0.5, "complete@5": 0.5, "routed": 0.0}}
        for p, g in by.items():
            out[s][p] = {"recall@5": 0.5 + g, "complete@5": 0.5 + g, "routed": p[0]}
    return out


def test_the_fold_picks_the_best_worst_margin_and_ties_go_to_fewer_routed() -> None:
    table = _table({
        "x": {(0.3, 1.0): 0.01, (0.6, 1.0): 0.01, (0.6, 2.0): 0.05},
        "y": {(0.3, 1.0): 0.01, (0.6, 1.0): 0.01, (0.6, 2.0): -0.02},
    })  # fmt: skip
    assert worst_margin(table, ["x", "y"], (0.6, 2.0)) == pytest.approx(-0.02)
    # (0.3, 1) and (0.6, 1) tie at +0.01: the one routing fewer queries
    assert choose(table, ["x", "y"]) == (0.3, 1.0)


def test_a_fold_where_every_pair_loses_keeps_no_routing() -> None:
    table = _table({"x": {(0.3, 1.0): -0.01}, "y": {(0.3, 1.0): 0.02}})
    assert choose(table, ["x", "y"]) == NONE
    assert choose(table, ["y"]) == (0.3, 1.0)


def test_held_out_reads_each_fold_on_its_own_table() -> None:
    a = _table({"x": {(0.3, 1.0): 0.02}, "y": {(0.3, 1.0): 0.01}, "z": {(0.3, 1.0): -0.03}})
    b = _table({"x": {(0.3, 1.0): -0.01}, "y": {(0.3, 1.0): 0.01}, "z": {(0.3, 1.0): 0.03}})
    got = held_out({"x": b, "y": a, "z": a})
    # x's fold (table b): y and z both gain, so it routes and x loses 0.01
    assert (got["x"]["t"], got["x"]["w"], got["x"]["recall@5 gain"]) == (0.3, 1.0, -0.01)
    # y's fold (table a): z loses, so no routing
    assert (got["y"]["t"], got["y"]["w"], got["y"]["recall@5 gain"]) == (0.0, 0.0, 0.0)
    assert got["z"]["t"] == 0.3 and got["z"]["recall@5 gain"] == pytest.approx(-0.03)


def test_the_held_out_confidence_reads_the_inputs_with_the_fold_model() -> None:
    rows = {"confidence": [0.7, 1.0, 0.4], "inputs": [[1.0, 0.0], None, [1.0, 2.0]],
            "skipped": [False, False, True]}  # fmt: skip
    got = held_confidence(rows, [0.0, 0.0])
    # a model of zeros says 0.5; a value by rule, or a skipped ranking, keeps its own
    assert got == [0.5, 1.0, 0.4]


def test_the_mixture_quantile_falls_in_the_routed_part_past_the_unrouted_share() -> None:
    part, at = mixture_quantile(0.5, 0.2)
    assert part == "default" and at == pytest.approx(0.625)
    part, at = mixture_quantile(0.9, 0.2)
    assert part == "routed" and at == pytest.approx(0.5)
    assert mixture_quantile(0.5, 0.0) == ("default", 0.5)
    with pytest.raises(ValueError, match="quantile"):
        mixture_quantile(1.0, 0.2)
