"""Long requests read in parts: each sentence or clause retrieved on its own, then one
joint ranking that covers every part that found something.

One dense vector of a 40-word request that names three services averages them:
the strongest service fills the top five and the others' tools fall out. A
request of that shape (enough content words, several sentences or clauses) is
cut into its parts (:func:`request_parts`); each part gets its own lexical and
dense retrieval and its own ranker probability that its first tool is right
(the retriever does this); :func:`joint_order` then merges: the whole request's
best first, then the best of each part the ranker is sure enough of (most sure
first), then the whole request's ranking. A part that is context ("I'm planning
a trip", "Thank you!") finds nothing it is sure of and moves nothing. Adding the
parts' scores into the whole request's (rather than only placing each sure
part's best) cost recall on single-tool requests of several sentences
(toolalpaca) for no gain on the multi-tool ones (toolbench).

The shape decides, not a switch: a short request has one part and is ranked as
before. The constants below were set on the six dev sets (docs/history/calibration.md, h/rank8:
a lower ``COVER_CONFIDENCE`` gains toolbench more and costs toolalpaca).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from toolscout.discovery.lexical import sentences, terms

#: a request is read in parts from this many distinct content terms on
MIN_TERMS = 12
#: the content terms a part needs to stand on its own (a shorter one joins its neighbour)
MIN_PART_TERMS = 3
#: the most parts one request is cut into (the rest joins the last)
MAX_PARTS = 6
#: a part's best tool is placed early only when the part's ranker probability is at least this
COVER_CONFIDENCE = 0.3

#: a request's parts are read (each encoded on its own) only when one of them points
#: elsewhere than the whole request lexically: its first BM25 tool at or past this rank of
#: the whole request's BM25 list (a tool absent from it counts as past every rank); a
#: request whose parts all agree is read as :data:`AGREEING` says. ``None`` (shipped):
#: every part is always read. Not shipped: rank 2, chosen on all six dev sets, reads 29% of
#: bfcl's requests in parts whole with no set losing, but chosen without toolbench (rank
#: 3) it costs toolbench 0.006 recall@5 and 0.009 complete@5 (``benchmarks/parts_pooled.py``,
#: docs/history/discovery-latency.md, "This round (h/parts2, round ten)")
DISAGREE_RANK: float | None = None
#: how a request whose parts agree with it is read: "whole" (its parts not read) or
#: "pooled" (its parts' vectors pooled from its own encoder run, discovery/queryvectors.py)
AGREEING = "whole"
#: the rank of a tool absent from the whole request's BM25 list
ABSENT = 10**6

#: clause boundaries inside a sentence: a sequencing word, or "and"/"also" after a comma
_CLAUSES = re.compile(
    r",?\s+(?:and\s+)?(?:then|after\s+that|afterwards|additionally|finally|also)\s+"
    r"|,\s+(?:and|but|plus)\s+",
    re.IGNORECASE,
)


def request_parts(text: str) -> list[str]:
    """The parts of a long request (its sentences and clauses, in order), or ``[]`` when
    the request is short or of one part."""
    return list(_request_parts(text))


@lru_cache(maxsize=256)  # a request's parts are asked for by its gates and its retrieval
def _request_parts(text: str) -> tuple[str, ...]:
    if len(set(terms(text))) < MIN_TERMS:
        return ()
    pieces = [
        clause.strip(" ,;")
        for sentence in sentences(text)
        for clause in _CLAUSES.split(sentence)
        if clause and clause.strip(" ,;")
    ]
    parts: list[str] = []
    for piece in pieces:
        if parts and len(terms(parts[-1])) < MIN_PART_TERMS:
            parts[-1] = f"{parts[-1]} {piece}"
        else:
            parts.append(piece)
    if len(parts) > 1 and len(terms(parts[-1])) < MIN_PART_TERMS:
        tail = parts.pop()
        parts[-1] = f"{parts[-1]} {tail}"
    if len(parts) < 2:
        return ()
    if len(parts) > MAX_PARTS:
        parts = [*parts[: MAX_PARTS - 1], " ".join(parts[MAX_PARTS - 1 :])]
    return tuple(parts)


@dataclass(frozen=True, slots=True)
class PartRanking:
    """One part's ranking: ids best first, each with its score relative to the best
    (in (0, 1]), and the ranker's probability that the first is right."""

    ids: Sequence[str]
    scores: Sequence[float]
    confidence: float


def joint_order(
    whole_ids: Sequence[str],
    whole_scores: Sequence[float],
    parts: Sequence[PartRanking],
    *,
    cover: float = COVER_CONFIDENCE,
) -> tuple[list[str], dict[str, float]]:
    """One ranking for a request read in parts, and each id's score in it.

    The whole request's first tool leads; then the first tool of each part whose
    probability is at least ``cover`` (most sure first), when not already placed; then the
    whole request's ranking. A tool only a part found keeps that part's score times its
    probability, scaled under the whole ranking's lowest, and comes after it.
    """
    score: dict[str, float] = dict(zip(whole_ids, whole_scores, strict=True))
    floor = min(whole_scores, default=1.0)
    tail: dict[str, float] = {}
    for part in parts:
        for t, s in zip(part.ids, part.scores, strict=True):
            if t not in score:
                tail[t] = max(tail.get(t, 0.0), floor * part.confidence * s)
    order: list[str] = list(whole_ids[:1])
    seen = set(order)
    for part in sorted(parts, key=lambda p: -p.confidence):
        if part.confidence >= cover and part.ids and part.ids[0] not in seen:
            order.append(part.ids[0])
            seen.add(part.ids[0])
    order += [t for t in whole_ids if t not in seen]
    seen.update(whole_ids)
    order += sorted((t for t in tail if t not in seen), key=lambda t: (-tail[t], t))
    for t in order:
        if t not in score:
            score[t] = tail[t]
    return order, score


def part_terms(part: str, kept: Sequence[str]) -> tuple[str, ...]:
    """A part's query terms: its own, among those the whole request kept (frequent-term
    pruning as decided for the whole request)."""
    keep = set(kept)
    return tuple(t for t in terms(part) if t in keep)


def disagreement(whole_ids: Sequence[str], part_firsts: Sequence[str]) -> int:
    """The largest rank in the whole request's BM25 list (``whole_ids``) of a part's first
    BM25 tool (:data:`ABSENT` when one is not in it; -1 when no part has one)."""
    where = {t: i for i, t in enumerate(whole_ids)}
    return max((where.get(t, ABSENT) for t in part_firsts), default=-1)


def parts_disagree(
    whole_ids: Sequence[str], part_firsts: Sequence[str], rank: float | None = None
) -> bool:
    """Whether a request's parts are to be read (:data:`DISAGREE_RANK`, or ``rank``)."""
    at = DISAGREE_RANK if rank is None else rank
    return at is None or disagreement(whole_ids, part_firsts) >= at
