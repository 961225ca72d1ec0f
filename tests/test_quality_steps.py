"""benchmarks/steps.py: a gate's rows are the mixture of the default's and the step-off
rows, and the gate is chosen leave-one-set-out by the worst margin (synthetic rows only)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import steps  # noqa: E402

ROWS = ("recall", "complete", "confidence", "right")


def _variant(recall: list[float]) -> dict[str, list[float]]:
    return {"recall": recall, "complete": recall, "confidence": [0.5] * len(recall),
            "right": recall}  # fmt: skip


def _set(default: list[float], off: list[float], terms: list[float], part: float) -> dict[str, Any]:
    """A set whose step "no dedupe" gives ``off``; every part scores ``part`` per query."""
    n = len(default)
    rows = {steps.DEFAULT: _variant(default)}
    rows.update({s: _variant(default) for s in steps.STEPS_OFF})
    rows["no dedupe"] = _variant(off)
    rows.update({p: _variant([part] * n) for p in steps.PARTS})
    shapes = {f: [0.0] * n for f in steps.FEATURES}
    shapes["terms"] = terms
    return {"queries": n, "rows": rows, "shapes": shapes, "evidence": {}}


def test_a_gate_takes_the_default_row_where_on_and_the_step_off_row_where_off() -> None:
    d = _set([1, 0, 1, 0], [0, 1, 0, 1], [2, 4, 30, 40], 0.5)
    assert steps.gated(d, "no dedupe", None, "recall") == [1, 0, 1, 0]
    assert steps.gated(d, "no dedupe", steps.NEVER, "recall") == [0, 1, 0, 1]
    # the step on for short requests only
    assert steps.gated(d, "no dedupe", ("terms", 10.0, "lt"), "recall") == [1, 0, 0, 1]
    assert steps.gated(d, "no dedupe", ("terms", 10.0, "ge"), "recall") == [0, 1, 1, 0]


def test_the_gate_is_chosen_by_the_worst_margin_over_the_best_part() -> None:
    # on long requests the step costs; on short ones it pays: "on where terms < t" wins
    short_good = _set([1, 1, 0, 0], [0, 0, 1, 1], [3, 5, 30, 40], 0.5)
    also = _set([1, 0, 0], [0, 0, 1], [4, 30, 50], 0.4)
    sets = {"a": short_good, "b": also}
    g = steps.choose_gate(sets, ["a", "b"], "no dedupe")
    assert g is not None and g[0] in steps.FEATURES and g[2] == "lt"
    assert steps.gated(short_good, "no dedupe", g, "recall") == [1, 1, 1, 1]
    # where nothing moves, no gate (the default) wins the tie
    flat = {"c": _set([1, 0], [1, 0], [3, 30], 0.5)}
    assert steps.choose_gate(flat, ["c"], "no dedupe") is None


def test_the_report_prints_the_ablation_and_each_steps_gate() -> None:
    sets = {
        "a": _set([1, 1, 0, 0], [0, 0, 1, 1], [3, 5, 30, 40], 0.5),
        "b": _set([1, 0, 0], [0, 0, 1], [4, 30, 50], 0.4),
    }
    table = "\n".join(steps.ablation(sets) + steps.gate_report(sets))
    assert "| a | 4 | 0.500 / 0.500 |" in table
    for step in steps.STEPS_OFF:
        assert f"### {step.removeprefix('no ')}: the gate chosen without each set" in table
    assert "dedupe where terms <" in table
