"""The naive baseline every tool-discovery setup starts from: a keyword counter.

A card scores +3 for each of its tags found in the query text and +1 for each
query word (lower-cased, split on whitespace) found in its summary. Only
entitled cards are ranked; ties keep catalog order; a card scoring zero is
never returned. It is here to be beaten, measurably, by ``toolscout eval``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from toolscout.cards import CapabilityCard
from toolscout.policy import Principal

if TYPE_CHECKING:
    from toolscout.discovery.catalog import Catalog

TAG_POINTS = 3
WORD_POINTS = 1


def naive_score(query: str, card: CapabilityCard) -> int:
    """+3 per card tag found in the query text, +1 per query word found in the card summary."""
    text = query.lower()
    summary = card.summary.lower()
    score = sum(TAG_POINTS for tag in card.tags if tag.lower() in text)
    score += sum(WORD_POINTS for word in text.split() if word in summary)
    return score


def naive_rank(
    query: str, cards: Sequence[CapabilityCard], k: int | None = None
) -> list[tuple[str, int]]:
    """(id, score) of the cards scoring above zero, best first, ties in the given order."""
    scored = [(card.id, s) for card in cards if (s := naive_score(query, card)) > 0]
    scored.sort(key=lambda pair: -pair[1])  # stable: ties keep catalog order
    return scored if k is None else scored[:k]


def naive_discover(
    catalog: Catalog, query: str, principal: Principal, k: int | None = 5
) -> list[tuple[str, int]]:
    """The baseline over the cards ``principal`` is entitled to in ``catalog``."""
    return naive_rank(query, catalog.entitle(principal).allowed, k)
