"""Multi-intent requests: split a request into the tasks it asks for, merge per-task rankings.

"Find the flight, book the hotel and add both to my calendar" needs three
tools. One ranking of the whole request tends to fill the top-k with the
strongest of them (five flight tools); ranking each task on its own and merging
so that every task is represented before any gets a second tool covers them all.

The split is cheap and conservative. Only a request carrying a sequencing cue
("then", "after that", "also", "as well as", "; ", ", and ") is split at all
(several sentences of context are one task: splitting those cost recall on every
dev set). It is then cut at sentence ends, the sequencing words, and a plain
"and" or comma only where both sides carry enough content words to be a task of
their own ("salt and pepper" is not two tasks). A configured
:class:`IntentSplitter` (an LLM, a parser) replaces the rule-based split.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from toolscout.discovery.lexical import sentences, terms

#: the most intents one request is split into
MAX_INTENTS = 6
#: content words (stemmed, stop words dropped) an intent needs to stand on its own
MIN_TERMS = 2
#: ... and a part split at a bare "and" or comma, on each side
MIN_TERMS_AND = 2

_SEQUENCE = re.compile(
    r",?\s+(?:and\s+)?(?:then|after\s+that|afterwards|next|finally|also|as\s+well\s+as)\s+"
    r"|,?\s+and\s+(?:also\s+)?(?=(?:please\s+)?[a-z]+\s)",
    re.IGNORECASE,
)
_COMMA = re.compile(r",\s+")
#: a request is split only when it carries a sequencing cue: context sentences
#: ("I run a bakery. How much flour ...") are one task, and splitting them cost recall
_CUE = re.compile(
    r"\b(?:and\s+then|then|after\s+that|afterwards|also|as\s+well\s+as|finally|next)\b"
    r"|;|,\s*and\s|,[^,]+\sand\s",
    re.IGNORECASE,
)


class IntentSplitter(Protocol):
    """A pluggable splitter (e.g. an LLM prompt): the tasks a request asks for."""

    def split(self, query: str) -> Sequence[str]: ...


def split_intents(text: str, splitter: IntentSplitter | None = None) -> list[str]:
    """The tasks ``text`` asks for, in order; ``[text]`` when it asks for one."""
    if splitter is not None:
        parts = [p.strip() for p in splitter.split(text) if p and p.strip()]
        return parts[:MAX_INTENTS] if len(parts) > 1 else [text]
    if not _CUE.search(text):  # no sequencing word: one task, however many sentences
        return [text]
    parts = []
    for sentence in sentences(text):
        for piece in _split_on(_SEQUENCE, sentence, MIN_TERMS_AND):
            parts += _split_on(_COMMA, piece, MIN_TERMS_AND)
    parts = _merge_short([p.strip(" ,.;") for p in parts if p.strip(" ,.;")])
    if len(parts) < 2:
        return [text]
    return parts[:MAX_INTENTS]


def _split_on(pattern: re.Pattern[str], text: str, min_terms: int) -> list[str]:
    """Split at ``pattern`` only where both sides are big enough to be tasks."""
    pieces = pattern.split(text)
    out: list[str] = []
    for piece in pieces:
        if out and (len(terms(piece)) < min_terms or len(terms(out[-1])) < min_terms):
            out[-1] = f"{out[-1]} and {piece}"
        else:
            out.append(piece)
    return out


def _merge_short(parts: Sequence[str]) -> list[str]:
    """Glue a fragment too short to be a task onto the part before it (or after it)."""
    out: list[str] = []
    for part in parts:
        if out and len(terms(part)) < MIN_TERMS:
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    if len(out) > 1 and len(terms(out[0])) < MIN_TERMS:
        out[1] = f"{out[0]} {out[1]}"
        out.pop(0)
    return out


def interleave(
    full: Sequence[str], per_intent: Sequence[Sequence[str]], rounds: int = 1
) -> list[str]:
    """One ranking: the whole request's best, then each intent's best (in request order),
    for ``rounds`` rounds; then the whole request's ranking. An intent whose best another
    intent already took counts as represented."""
    out: list[str] = list(full[:1])
    seen: set[str] = set(out)
    for rank in range(rounds):
        for ranking in per_intent:
            if rank < len(ranking) and ranking[rank] not in seen:
                seen.add(ranking[rank])
                out.append(ranking[rank])
    out += [t for t in full if t not in seen]
    return out
