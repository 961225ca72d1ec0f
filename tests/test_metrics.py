"""Tests for toolscout.evaluate.metrics: every value below is worked out by hand in the comments."""

from __future__ import annotations

import math

import pytest

from toolscout.evaluate.metrics import (
    complete_at,
    latency_summary,
    mean_scores,
    mrr_at,
    ndcg_at,
    peak_rss_mb,
    percentile,
    recall_at,
    score_query,
)

KS = (1, 3, 5, 10)
X = [f"x{i}" for i in range(10)]  # ids that are never gold

# five queries: (ranked ids, gold ids)
EXAMPLE = [
    # q1: the only gold tool first
    (["a", *X[:9]], ["a"]),
    # q2: the only gold tool second
    (["x0", "a", *X[1:9]], ["a"]),
    # q3: two gold tools, ranks 1 and 6
    (["a", "x0", "x1", "x2", "x3", "b", *X[4:8]], ["a", "b"]),
    # q4: nothing returned at all
    ([], ["a"]),
    # q5: three gold tools, ranks 2 and 4; the third never returned
    (["x0", "a", "x1", "b", "x2", *X[3:8]], ["a", "b", "c"]),
]

L2, L3, L5, L7 = math.log2(2), math.log2(3), math.log2(5), math.log2(7)


def test_per_query_values_by_hand() -> None:
    q1, q2, q3, q4, q5 = (score_query(r, g, KS) for r, g in EXAMPLE)
    # q1: gold at rank 1 everywhere; DCG = 1/log2(2) = 1 = IDCG
    assert q1 == {
        "recall@1": 1.0, "recall@3": 1.0, "recall@5": 1.0, "recall@10": 1.0,
        "complete@5": 1.0, "ndcg@10": 1.0, "mrr@10": 1.0,
    }  # fmt: skip
    # q2: rank 2 -> missed by @1; DCG = 1/log2(3) = 0.6309, IDCG = 1; MRR = 1/2
    assert q2["recall@1"] == 0.0 and q2["recall@3"] == 1.0 and q2["complete@5"] == 1.0
    assert q2["ndcg@10"] == pytest.approx(1 / L3) == pytest.approx(0.63093, abs=1e-5)
    assert q2["mrr@10"] == 0.5
    # q3: a@1, b@6 -> recall 1/2 up to @5, 2/2 at @10; not complete@5
    # DCG = 1/log2(2) + 1/log2(7) = 1 + 0.35621 = 1.35621
    # IDCG (2 gold) = 1/log2(2) + 1/log2(3) = 1 + 0.63093 = 1.63093; nDCG = 0.83156
    assert [q3[f"recall@{k}"] for k in KS] == [0.5, 0.5, 0.5, 1.0]
    assert q3["complete@5"] == 0.0
    assert q3["ndcg@10"] == pytest.approx((1 / L2 + 1 / L7) / (1 / L2 + 1 / L3))
    assert q3["ndcg@10"] == pytest.approx(0.83156, abs=1e-5)
    assert q3["mrr@10"] == 1.0
    # q4: nothing returned -> every metric 0
    assert all(v == 0.0 for v in q4.values())
    # q5: a@2, b@4, c missing -> recall 0, 1/3, 2/3, 2/3; not complete
    # DCG = 1/log2(3) + 1/log2(5) = 0.63093 + 0.43068 = 1.06161
    # IDCG (3 gold) = 1 + 0.63093 + 0.5 = 2.13093; nDCG = 0.49819; MRR = 1/2
    assert [q5[f"recall@{k}"] for k in KS] == pytest.approx([0, 1 / 3, 2 / 3, 2 / 3])
    assert q5["complete@5"] == 0.0
    assert q5["ndcg@10"] == pytest.approx(0.49819, abs=1e-5)
    assert q5["mrr@10"] == 0.5


def test_means_by_hand() -> None:
    means = mean_scores([score_query(r, g, KS) for r, g in EXAMPLE])
    expected = {
        "recall@1": (1 + 0 + 0.5 + 0 + 0) / 5,  # 0.3
        "recall@3": (1 + 1 + 0.5 + 0 + 1 / 3) / 5,  # 2.8333 / 5 = 0.56667
        "recall@5": (1 + 1 + 0.5 + 0 + 2 / 3) / 5,  # 3.1667 / 5 = 0.63333
        "recall@10": (1 + 1 + 1 + 0 + 2 / 3) / 5,  # 3.6667 / 5 = 0.73333
        "complete@5": (1 + 1 + 0 + 0 + 0) / 5,  # 0.4
        "ndcg@10": (1 + 0.63093 + 0.83156 + 0 + 0.49819) / 5,  # 2.96068 / 5 = 0.59214
        "mrr@10": (1 + 0.5 + 1 + 0 + 0.5) / 5,  # 0.6
    }
    assert means.keys() == expected.keys()
    for key, value in expected.items():
        assert means[key] == pytest.approx(value, abs=1e-4), key
    assert means["recall@1"] == pytest.approx(0.3)
    assert means["ndcg@10"] == pytest.approx(0.59214, abs=1e-4)


def test_edge_cases() -> None:
    assert recall_at(["a"], [], 5) == 0.0
    assert complete_at(["a"], []) == 0.0
    assert ndcg_at(["a"], []) == 0.0
    assert mrr_at(["x", "a"], ["a"], k=1) == 0.0  # beyond the cut-off
    # duplicate gold ids count once
    assert recall_at(["a"], ["a", "a"], 1) == 1.0
    # more than 10 gold tools: IDCG is over 10 ranks, so a perfect top 10 is 1
    gold = [f"g{i}" for i in range(12)]
    assert ndcg_at(gold, gold) == pytest.approx(1.0)
    assert mean_scores([]) == {}


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert [percentile(values, p) for p in (50, 95, 99, 100)] == [50, 95, 99, 100]
    # [1, 3, 5]: p50 -> ceil(1.5) = rank 2 -> 3; p99 -> ceil(2.97) = rank 3 -> 5
    assert percentile([5.0, 1.0, 3.0], 50) == 3.0
    assert percentile([5.0, 1.0, 3.0], 99) == 5.0
    assert percentile([7.0], 1) == 7.0
    assert percentile([], 50) == 0.0
    with pytest.raises(ValueError):
        percentile([1.0], 0)
    assert latency_summary([1.0, 2.0, 3.0, 4.0]) == {"p50": 2.0, "p95": 4.0, "p99": 4.0}


def test_peak_rss_is_plausible() -> None:
    assert 1 < peak_rss_mb() < 1_000_000
