"""Choosing the blend and the dedupe yield (toolscout.evaluate.fitting), on the eval fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import FIXTURES, embedder
from toolscout.discovery.catalog import Catalog
from toolscout.evaluate.evalset import read_queries, read_tools
from toolscout.evaluate.fitting import (
    best_part,
    choose_blend,
    mean,
    paired_interval,
    part_recalls,
    recall_grid,
)
from toolscout.evaluate.harness import STRATEGIES, discover_once, eval_principal
from toolscout.evaluate.metrics import recall_at
from toolscout.settings import SearchSettings

EVAL = FIXTURES / "eval"


def test_the_pair_with_the_largest_worst_margin_wins_without_the_held_out_set() -> None:
    means = {
        "a": {(0.0, 0.0): 0.80, (4.0, 0.0): 0.84, (4.0, 0.5): 0.84},
        "b": {(0.0, 0.0): 0.50, (4.0, 0.0): 0.49, (4.0, 0.5): 0.52},
        "c": {(0.0, 0.0): 0.90, (4.0, 0.0): 0.70, (4.0, 0.5): 0.70},
    }
    # per-query recalls with those means (two queries each)
    grids = {n: {p: [m - 0.1, m + 0.1] for p, m in g.items()} for n, g in means.items()}
    parts = {"a": [0.82, 0.82], "b": [0.4, 0.6], "c": [0.8, 0.8]}
    # over a and b: (0, 0) is -0.02 at worst, (4, 0) -0.01, (4, 0.5) +0.02
    assert choose_blend(grids, parts, "c") == (4.0, 0.5)
    # c drags (4, *) to -0.10: (0, 0) is the better worst case
    assert choose_blend(grids, parts, None) == (0.0, 0.0)
    # a tie goes to the smaller blend, then the smaller yield
    tie = {"a": {(0.0, 0.5): [0.9], (0.0, 0.0): [0.9], (2.0, 0.0): [0.9]}}
    assert choose_blend(tie, {"a": [0.5]}, None) == (0.0, 0.0)
    # a tie of the worst margins goes to the larger mean margin before the smaller pair:
    # a's margin is the worst for every pair (-0.1), b gains 0.05 with the yield 0.9
    level = {
        "a": {(4.0, 0.0): [0.4], (4.0, 0.9): [0.4], (32.0, 0.0): [0.4]},
        "b": {(4.0, 0.0): [0.6], (4.0, 0.9): [0.65], (32.0, 0.0): [0.62]},
    }
    assert choose_blend(level, {"a": [0.5], "b": [0.5]}, None) == (4.0, 0.9)
    # without b the three pairs are level on both: the smaller pair again
    assert choose_blend(level, {"a": [0.5], "b": [0.5]}, "b") == (4.0, 0.0)
    with pytest.raises(ValueError, match="besides the held-out"):
        choose_blend({"a": grids["a"]}, parts, "a")


def test_the_grid_scores_what_discover_returns(tmp_path: Path) -> None:
    specs, _ = read_tools(EVAL / "tools.jsonl")
    queries = read_queries(EVAL / "queries.jsonl")
    with Catalog.open(tmp_path / "eval.db", embedder=embedder(), log=False) as cat:
        cat.add(specs, replace_all=True)
        grid = recall_grid(cat, queries, SearchSettings(), blends=(0.0, 16.0), yields=(0.0, 1.0))
        assert set(grid) == {(0.0, 0.0), (0.0, 1.0), (16.0, 0.0), (16.0, 1.0)}
        principal = eval_principal(cat)
        for blend, y in grid:
            settings = SearchSettings(ranker_blend=blend, dedupe_yield=y)
            got = [
                recall_at(discover_once(cat, settings, q.query, principal).ranked, q.gold, 5)
                for q in queries
            ]
            assert grid[(blend, y)] == pytest.approx(got)
        parts = part_recalls(cat, queries)
        assert set(parts) == {"bm25", "dense", "hybrid-fixed"}
        for name, got in parts.items():
            part = STRATEGIES[name]
            assert got == [
                recall_at(discover_once(cat, part, q.query, principal).ranked, q.gold, 5)
                for q in queries
            ]
        assert mean(best_part(cat, queries)) == pytest.approx(max(map(mean, parts.values())))


def test_the_paired_interval_holds_the_mean_and_narrows_with_agreement() -> None:
    a = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    b = [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    m, low, high = paired_interval(a, b)
    assert m == pytest.approx(0.25) and low <= m <= high and high - low > 0
    # identical answers: no difference and no doubt about it
    assert paired_interval(a, a) == (0.0, 0.0, 0.0)
    # seeded: the same interval twice
    assert paired_interval(a, b) == (m, low, high)
    with pytest.raises(ValueError, match="equally long"):
        paired_interval(a, b[:3])
