"""The confidence check: the confidence discovery reported against what happened next.

A discovery that showed tools and was followed by a call or feedback (linked by
:mod:`toolscout.telemetry.links`) was *right first* when its first tool is among the tools
then used. Per band of confidence (:data:`CONFIDENCE_BANDS`) the check gives how often
that was so, and, from :data:`MIN_OUTCOMES` outcomes on, the one-number correction of the
bias that would make them agree (``calibrate.fit_shift``); accepting it
(:func:`toolscout.telemetry.report.accept_confidence`) stores it with the catalog.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from toolscout.discovery.calibrate import fit_shift
from toolscout.telemetry.links import Need
from toolscout.telemetry.log import DiscoveryRow

__all__ = [
    "CONFIDENCE_BANDS",
    "MIN_OUTCOMES",
    "ConfidenceBand",
    "ConfidenceCheck",
    "confidence_check",
]

#: discoveries with an outcome needed before a confidence correction is proposed
MIN_OUTCOMES = 30
#: the bands of confidence the check reports (the thresholds docs/benchmarks.md advises)
CONFIDENCE_BANDS = (0.0, 0.3, 0.5, 0.8, 1.0)


@dataclass(frozen=True, slots=True)
class ConfidenceBand:
    """Discoveries whose reported confidence fell in ``[low, high)`` and had an outcome."""

    low: float
    high: float
    discoveries: int
    mean_confidence: float
    right_first: float  # share whose first tool was among the tools then used

    def to_dict(self) -> dict[str, Any]:
        return {
            "low": self.low,
            "high": self.high,
            "discoveries": self.discoveries,
            "mean_confidence": round(self.mean_confidence, 4),
            "right_first": round(self.right_first, 4),
        }


@dataclass(frozen=True, slots=True)
class ConfidenceCheck:
    """The reported confidence against the outcomes the log links to it."""

    outcomes: int  # discoveries that showed tools and were followed by a call or feedback
    mean_confidence: float
    right_first: float
    bands: tuple[ConfidenceBand, ...]
    #: the correction (logits) that makes them agree; None below MIN_OUTCOMES
    shift: float | None
    since: float  # outcomes before this were not read (the last accepted correction)

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcomes": self.outcomes,
            "mean_confidence": round(self.mean_confidence, 4),
            "right_first": round(self.right_first, 4),
            "bands": [b.to_dict() for b in self.bands],
            "shift": self.shift,
            "min_outcomes": MIN_OUTCOMES,
            "since": self.since,
        }


def confidence_check(needs: Sequence[Need], since: float = 0.0) -> ConfidenceCheck:
    """Each discovery that showed tools and was followed by a call or feedback: was its
    first tool among the tools used? Per band, and the correction that fits them."""
    used: dict[str, tuple[DiscoveryRow, set[str]]] = {}
    for need in needs:
        d = need.discovery
        # 1.0 is not the model's estimate but a rule (every tool shown, under 10 entitled;
        # or a fixed fusion's exact mention): its first tool says nothing of the confidence
        if d is None or not d.shown or d.ts < since or d.confidence >= 1.0:
            continue
        used.setdefault(d.id, (d, set()))[1].add(need.event.tool_id)
    conf = [d.confidence for d, _ in used.values()]
    right = [d.shown[0] in tools for d, tools in used.values()]
    bands = []
    for lo, hi in pairwise(CONFIDENCE_BANDS):
        idx = [i for i, c in enumerate(conf) if lo <= c < hi]  # 1.0 was left out above
        if idx:
            bands.append(
                ConfidenceBand(
                    lo,
                    hi,
                    len(idx),
                    sum(conf[i] for i in idx) / len(idx),
                    sum(right[i] for i in idx) / len(idx),
                )
            )
    n = len(conf)
    return ConfidenceCheck(
        outcomes=n,
        mean_confidence=sum(conf) / n if n else 0.0,
        right_first=sum(right) / n if n else 0.0,
        bands=tuple(bands),
        shift=fit_shift(conf, right) if n >= MIN_OUTCOMES else None,
        since=since,
    )
