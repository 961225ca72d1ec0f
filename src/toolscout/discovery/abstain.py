"""Abstention: when no entitled tool fits, say so instead of showing the least bad one.

Discovery abstains when the calibrated confidence that the first tool is right
(``Shortlist.confidence``, discovery/calibrate.py) falls below
``SearchSettings.abstain_below``, or when it falls below :data:`UNMATCHED_BELOW` and the
shortlist is :func:`unmatched` (no tool shown has any of the request's words in its name,
summary, aliases or tags: found by meaning alone, the way an unservable request lands on
the nearest tools). The shortlist is then empty, with the reason and the confidence. It
never abstains when the request names a tool (an exact mention or a ``select:`` name),
when whole groups or every entitled tool are shown anyway (the ``groups`` and ``all``
tiers), or with the fixed fusions, whose confidence is not calibrated. The
nothing-entitled case is always said.

Off by default (``abstain_below`` 0 turns both rules off). The confidence alone, at
:data:`RECOMMENDED`, keeps recall@5 lost on answerable requests within 0.01 but abstains
on only 3-10% of unservable ones; with the unmatched rule 7% (bfcl) and 33% (demo) at the
same budget (docs/benchmarks.md) — measured on four of the six dev sets (not apibench or
toolbench), and a phrase learned from usage that is in none of a tool's card fields is
not consulted (its tool could be withheld on a small catalog).
So a deployment opts in with ``SearchSettings(abstain_below=RECOMMENDED)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from toolscout.discovery.inject import Tier
from toolscout.settings import SearchSettings

if TYPE_CHECKING:
    from toolscout.cards import CapabilityCard
    from toolscout.discovery.calibrate import FieldTerms
    from toolscout.discovery.catalog import Catalog
    from toolscout.discovery.search import Query

#: the threshold benchmarks/abstention.py chose leave-one-set-out (recall@5 lost <= 0.01)
RECOMMENDED = 0.11
#: embedding models (by model id) that read English only
ENGLISH_ONLY = frozenset({"all-MiniLM-L6-v2-int8"})
#: below this confidence, a shortlist none of whose tools shares a word with the request
#: (:func:`unmatched`) abstains too, when abstention is on: the smallest leave-one-set-out
#: fold threshold (recall@5 lost <= 0.01 on the other sets) of
#: ``benchmarks/abstention.py --from-rows benchmarks/results/abstention_rows/*.json``
#: (rows written by ``--sets S --limit 300 --rows``; restbench, toolalpaca, metatool, bfcl)
UNMATCHED_BELOW = 0.26


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
    unmatched: Callable[[], bool] = lambda: False,
) -> Abstention | None:
    """Whether this selection abstains, and why (None: it does not). ``unmatched`` says
    (when asked) whether no tool shown shares a word with the request (:func:`unmatched`)."""
    threshold = settings.abstain_below
    if n_entitled == 0:
        return Abstention(AbstainReason.NOTHING_ENTITLED, 0.0, threshold)
    if named or tier is not Tier.PROGRESSIVE or settings.fusion != "learned" or threshold <= 0:
        return None
    if confidence < threshold:
        return Abstention(AbstainReason.NO_TOOL_FITS, confidence, threshold)
    if confidence < UNMATCHED_BELOW and unmatched():
        return Abstention(AbstainReason.NO_TOOL_FITS, confidence, UNMATCHED_BELOW)
    return None


def unmatched(
    query_terms: Sequence[str],
    shown: Iterable[str],
    fields: FieldTerms,
    *,
    any_language: bool,
    also: Mapping[str, Iterable[str]] | None = None,
) -> bool:
    """Whether no tool shown has any of the request's content words in its name, summary
    or the terms ``also`` gives it (its aliases and tags): the tools were found by meaning
    alone, the way an unservable request lands on the nearest tools. With an embedding
    model that reads other languages (``any_language``), a request none of whose words the
    catalog's names and summaries use at all may be in another language, and is not judged
    by its words."""
    wanted = list(dict.fromkeys(query_terms))
    if not wanted:
        return False
    known = [t for t in wanted if t in fields.in_name or t in fields.in_summary]
    if not known:
        return not any_language
    empty: frozenset[str] = frozenset()
    for tool_id in shown:
        held = fields.name.get(tool_id, empty) | fields.summary.get(tool_id, empty)
        held = held | frozenset((also or {}).get(tool_id, ()))
        if any(t in held for t in known):
            return False
    return True


def card_terms(cards: Iterable[CapabilityCard]) -> dict[str, frozenset[str]]:
    """Each card's alias and tag terms (what :func:`unmatched` reads beside the fields)."""
    from toolscout.discovery.lexical import terms

    return {c.id: frozenset(terms(" ".join((*c.aliases, *c.tags)))) for c in cards}


def reads_any_language(model_id: str) -> bool:
    """Whether an embedding model may match a request in another language than the
    catalog's (every model but the English-only default, to be safe)."""
    return model_id not in ENGLISH_ONLY


def shown_unmatched(catalog: Catalog, query: Query, shown: Sequence[str]) -> bool:
    """:func:`unmatched` for a discovery: every content term of the request (pruned ones
    too), the catalog's fields, the shown cards' aliases and tags, its model's languages."""
    cards = [c for c in map(catalog.card, shown) if c is not None]
    return unmatched(
        (*query.terms, *query.dropped),
        shown,
        catalog.phrases().fields,
        any_language=reads_any_language(catalog.embedder.model_id),
        also=card_terms(cards),
    )
