"""Abstention: when no entitled tool fits, say so instead of showing the least bad one.

Discovery abstains when the calibrated confidence that the first tool is right
(``Shortlist.confidence``, discovery/calibrate.py) falls below
``SearchSettings.abstain_below``: the shortlist is then empty, with the reason and the
confidence. It never abstains when the request names a tool (an exact mention or a
``select:`` name), when whole groups or every entitled tool are shown anyway (the
``groups`` and ``all`` tiers), or with the fixed fusions, whose confidence is not
calibrated. The nothing-entitled case is always said.

Off by default: :data:`RECOMMENDED` was chosen leave-one-set-out so that recall@5 lost on
answerable requests stays within 0.01 (``benchmarks/abstention.py``, docs/benchmarks.md),
but at it only 3-10% of unservable requests abstain, and a phrase learned from usage does
not lift the calibrated confidence past it on a small catalog (the learned tool would be
withheld); so a deployment opts in with ``SearchSettings(abstain_below=RECOMMENDED)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from toolscout.discovery.inject import Tier
from toolscout.settings import SearchSettings

#: the threshold benchmarks/abstention.py chose leave-one-set-out (recall@5 lost <= 0.01)
RECOMMENDED = 0.11


class AbstainReason(StrEnum):
    """Why a shortlist is empty on purpose."""

    #: the caller may use no tool at all
    NOTHING_ENTITLED = "nothing_entitled"
    #: no entitled tool fits the request well enough
    NO_TOOL_FITS = "no_tool_fits"


@dataclass(frozen=True, slots=True)
class Abstention:
    reason: AbstainReason
    confidence: float
    threshold: float


def abstention(
    *,
    tier: Tier,
    n_entitled: int,
    confidence: float,
    named: bool,
    settings: SearchSettings,
) -> Abstention | None:
    """Whether this selection abstains, and why (None: it does not)."""
    threshold = settings.abstain_below
    if n_entitled == 0:
        return Abstention(AbstainReason.NOTHING_ENTITLED, 0.0, threshold)
    if named or tier is not Tier.PROGRESSIVE or settings.fusion != "learned" or threshold <= 0:
        return None
    if confidence < threshold:
        return Abstention(AbstainReason.NO_TOOL_FITS, confidence, threshold)
    return None
