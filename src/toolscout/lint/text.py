"""Checks on the words of a card: size, sentences, empty or echoing descriptions, jargon."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from toolscout.cards import card_tokens
from toolscout.discovery.lexical import STOPWORDS, stem, words
from toolscout.lint.findings import Finding
from toolscout.lint.source import LintTool

#: the card budget the article recommends (a card is 30-60 tokens; lint holds it to 50)
DEFAULT_TOKEN_BUDGET = 50

#: verbs that say what kind of operation a name is, not what it is about
GENERIC_NAME_WORDS = frozenset(
    (
        "get list query read fetch find search run do make set put post update create add new "
        "delete remove handle process execute call api tool v1 v2 v3 by for to of the all info "
        "data item items object objects record records"
    ).split()
)

# a sentence ends at . ! or ? followed by a space and a capital or digit, not after an
# abbreviation such as "e.g." or a single letter ("U.S.")
_SENTENCE_END = re.compile(
    r"(?<!\b[A-Za-z])(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)[.!?]\s+(?=[A-Z0-9])"
)


def sentences(text: str) -> int:
    """How many sentences ``text`` holds (abbreviations and decimals do not end one)."""
    text = text.strip()
    return len(_SENTENCE_END.split(text)) if text else 0


def _content(text: str) -> set[str]:
    return {stem(w) for w in words(text) if w not in STOPWORDS and not w.isdigit()}


def check_size(tools: Iterable[LintTool], budget: int = DEFAULT_TOKEN_BUDGET) -> list[Finding]:
    out = []
    for t in tools:
        n = card_tokens(t.spec.card)
        if n > budget:
            out.append(
                Finding.of(
                    "card-too-long",
                    [t.id],
                    f"{t.id}: the card is {n} tokens, over the budget of {budget}",
                    "cut the summary to one plain sentence and keep the 2-4 most distinct "
                    "aliases; the full schema is sent only when the tool is shortlisted",
                    tokens=n,
                    budget=budget,
                )
            )
    return out


def check_summary(tools: Iterable[LintTool]) -> list[Finding]:
    out = []
    for t in tools:
        card = t.spec.card
        n = sentences(card.summary)
        if n > 1:
            out.append(
                Finding.of(
                    "summary-multi-sentence",
                    [t.id],
                    f"{t.id}: the summary is {n} sentences",
                    "keep one sentence that says what the tool does; move usage notes to "
                    "not_for hints and details to parameter descriptions",
                    sentences=n,
                )
            )
        said = _content(card.summary)
        name_words = _content(card.name) | _content(card.id)
        if t.described and said and said <= name_words:
            out.append(
                Finding.of(
                    "description-name-only",
                    [t.id],
                    f"{t.id}: the description {card.summary!r} only repeats the name",
                    "say what the tool does, on what, and when to use it, in users' words",
                )
            )
    return out


def check_aliases(tools: Sequence[LintTool]) -> list[Finding]:
    """Missing aliases, and names in jargon that share no word with users' words."""
    vocabulary: set[str] = set()
    for t in tools:
        vocabulary |= _content(" ".join(t.spec.card.aliases))
    out = []
    for t in tools:
        card = t.spec.card
        if not card.aliases:
            out.append(
                Finding.of(
                    "aliases-missing",
                    [t.id],
                    f"{t.id} has no aliases",
                    "add 2-4 phrases users actually say for this task (e.g. from support "
                    "tickets or `toolscout report` alias suggestions)",
                )
            )
        jargon = _jargon(card.name, card.aliases, card.summary, vocabulary)
        if jargon:
            where = "any alias in the catalog" if card.aliases else "its summary"
            out.append(
                Finding.of(
                    "jargon-name",
                    [t.id],
                    f"{t.id}: the name {card.name!r} shares no word with {where}; "
                    f"{', '.join(jargon)} are internal words users do not type",
                    "rename it with a verb and object from users' words, or add an alias "
                    "that links the name's words to what users ask",
                    name_words=list(jargon),
                )
            )
    return out


def _jargon(name: str, aliases: Sequence[str], summary: str, vocabulary: set[str]) -> list[str]:
    """The name's object words, if none of them is a word users are known to use.

    The first word of a name is usually its verb (``query_``, ``get_``) and says
    little; the words after it name the thing acted on. Users' words are the
    aliases — this card's and every other card's — when the card has any; without
    aliases, the card's own summary stands in for them.
    """
    objects = [w for w in dict.fromkeys(words(name)[1:]) if w not in GENERIC_NAME_WORDS]
    objects = [w for w in objects if w not in STOPWORDS and not w.isdigit() and len(w) > 1]
    if len(objects) < 2:  # one object word is too little to call a name jargon
        return []
    users = (_content(" ".join(aliases)) | vocabulary) if aliases else _content(summary)
    if any(stem(w) in users for w in objects):
        return []
    return objects
