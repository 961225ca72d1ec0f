"""benchmarks/quality_ship.py --shipped-only: the shipped arm judged against an older result's
in-set figures, strictly (round twenty-two's in-set check of the "group_lead" column)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


# -- the in-set check against an older result (benchmarks/quality_ship.py --shipped-only) ---
def test_one_request_of_199_is_a_loss_past_the_rule_though_it_prints_as_0_0050() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import quality_ship

    n = 199
    before = {"s": [0.9523, round(189 / n, 4)]}  # 189 of 199 complete, as quality.json keeps it
    whole = ([1.0] * n, [1.0] * 189 + [0.0] * 10)
    got, broken = quality_ship.against({"s": whole}, before)
    assert broken == [] and got["s"]["complete@5"]["diff"] == 0.0
    one_less = (whole[0], [1.0] * 188 + [0.0] * 11)
    got, broken = quality_ship.against({"s": one_less}, before)
    assert got["s"]["complete@5"]["now"] == round(188 / n, 4)
    assert len(broken) == 1 and broken[0].startswith("s complete@5 -0.00503")
    with pytest.raises(SystemExit, match="no in-set figures for other"):
        quality_ship.against({"other": whole}, before)
