"""benchmarks/confidence_prior.py: the held-out mapping from a catalog's pseudo shift to a
logit shift is fitted on the other sets only, and the twin input reads the card cosines
as it says."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import confidence_prior  # noqa: E402
from toolscout.discovery.confidence import MAX_SHIFT  # noqa: E402


def test_each_form_maps_the_pseudo_shift_by_the_other_sets_fit() -> None:
    pseudo, real = [0.0, 1.0, 2.0], [1.0, 3.0, 5.0]  # real = 2·pseudo + 1 exactly
    assert confidence_prior.mapped("a*p+b", pseudo, real, 0.5) == 2.0
    # through the origin: a = Σxy / Σxx = 13 / 5
    assert abs(confidence_prior.mapped("a*p", pseudo, real, 1.0) - 13 / 5) < 1e-12
    assert confidence_prior.mapped("p", pseudo, real, -0.7) == -0.7
    assert confidence_prior.mapped("a*p+b", pseudo, real, 100.0) == MAX_SHIFT


def _rows(conf: list[float], right: list[bool]) -> tuple[np.ndarray, np.ndarray]:
    """One-column rows whose model (weight 1) gives these confidences."""
    z = np.log(np.asarray(conf) / (1 - np.asarray(conf)))
    return z[:, None], np.asarray(right, dtype=np.float64)


def test_a_set_is_corrected_by_what_the_others_teach_and_never_by_its_own_outcomes() -> None:
    # three sets whose pseudo-queries say exactly how far off their real confidence is,
    # and a fourth whose outcomes (all wrong) the mapping must not read
    rows, pseudo = {}, {}
    for name, (pc, pr, rc, rr) in {
        "a": (0.5, [True] * 8 + [False] * 2, 0.5, [True] * 8 + [False] * 2),
        "b": (0.5, [True] * 5 + [False] * 5, 0.5, [True] * 5 + [False] * 5),
        "c": (0.5, [True] * 2 + [False] * 8, 0.5, [True] * 2 + [False] * 8),
        "d": (0.5, [True] * 5 + [False] * 5, 0.5, [False] * 10),
    }.items():
        rows[name] = _rows([rc] * 10, rr)
        pseudo[name] = _rows([pc] * 10, pr)
    got = confidence_prior.measure(rows, {"card": pseudo}, {n: [1.0] for n in rows})
    # d's pseudo-queries are calibrated, so the others' fit (real ≈ pseudo) leaves it alone
    # although its own outcomes call for a large negative shift
    assert got["d"]["real_shift"] < -1.0
    assert abs(got["d"]["after"]["card a*p"][0]) < 0.05
    # a's pseudo-queries are under-confident like its real ones: it is shifted up
    assert got["a"]["after"]["card p"][0] > 0.5
    assert got["a"]["after"]["card p"][1] < got["a"]["before"][0]


def test_the_twin_readings_of_card_cosines() -> None:
    cos = [[0.95, 0.91, 0.85, 0.2], [], [0.5]]
    col = lambda how: confidence_prior.twin_column(cos, how)[:, 0].tolist()  # noqa: E731
    assert col("max") == [0.95, 0.0, 0.5]
    assert col("n90") == [np.log1p(2), 0.0, 0.0]
    assert col("n80") == [np.log1p(3), 0.0, 0.0]
    assert np.allclose(col("mean3"), [(0.95 + 0.91 + 0.85) / 3, 0.0, 0.5 / 3])
