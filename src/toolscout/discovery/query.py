"""A request as retrieval reads it, and the names it mentions verbatim.

:func:`parse_query` validates a request, keeps the part that matters (``focus``) and
splits it into terms, pruning those too frequent in the catalog to tell tools apart;
:class:`PhraseIndex` finds the tool names, ids and aliases a request mentions verbatim,
for the exact-hit guarantee (and carries the catalog's field terms and calibration, which
are rebuilt whenever it is).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from toolscout.cards import CapabilityCard, ToolSpec
from toolscout.discovery.calibrate import Calibration, FieldTerms, idf_of
from toolscout.discovery.focus import focus
from toolscout.discovery.kept import read_ahead
from toolscout.discovery.lexical import STOPWORDS, identifiers, phrase_key, stem, terms, words
from toolscout.errors import QueryError
from toolscout.settings import SearchSettings

__all__ = [
    "PhraseIndex",
    "Query",
    "closest",
    "closest_first",
    "parse_query",
    "prune_frequent",
    "qualified",
]

#: a query term found in more than this share of documents is dropped (when others remain)
FREQUENT_TERM_SHARE = 0.08
#: ... and, in large catalogs, one found in more than this many documents: BM25 cost grows
#: with the posting lists it walks, so this bounds lexical latency at 100k tools
FREQUENT_TERM_MAX_DOCS = 1000
#: the longest name or alias phrase looked for verbatim in a query, in words
MAX_PHRASE_WORDS = 8
_RUN_RE = re.compile(r"[A-Za-z0-9]+")


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    terms: tuple[str, ...]
    dropped: tuple[str, ...]
    identifiers: tuple[str, ...]


def parse_query(text: str, df: Mapping[str, int], n_docs: int, settings: SearchSettings) -> Query:
    """Validate and normalise a query; very frequent terms are pruned."""
    if not isinstance(text, str) or not text.strip():
        raise QueryError("the query is empty")
    if len(text) > settings.max_request_chars:
        raise QueryError(
            f"the query is {len(text)} characters long; the limit is {settings.max_request_chars}"
        )
    # a lone surrogate (a JSON "\ud800" escape) cannot be encoded, stored or embedded
    text = focus(text.encode("utf-8", "replace").decode("utf-8"), settings.max_query_chars)
    all_terms = list(dict.fromkeys(terms(text)))
    read_ahead(df, all_terms)  # a store's vocabulary read per term: this request's in one read
    kept, dropped = prune_frequent(all_terms, df, n_docs)
    return Query(text.strip(), kept, dropped, tuple(identifiers(text)))


def prune_frequent(
    all_terms: Sequence[str], df: Mapping[str, int], n_docs: int
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A request's terms split into those kept and those pruned as too frequent in the
    catalog to tell its tools apart; never pruned to nothing (its rarest terms stay)."""
    cutoff = min(max(FREQUENT_TERM_SHARE * n_docs, 50), FREQUENT_TERM_MAX_DOCS)
    kept = [t for t in all_terms if df.get(t, 0) <= cutoff]
    if not kept:  # never prune a query to nothing: keep its rarest terms
        kept = sorted(all_terms, key=lambda t: df.get(t, 0))[:3]
    return tuple(kept), tuple(t for t in all_terms if t not in kept)


class PhraseIndex:
    """Names, ids and aliases under their canonical form, for the exact-hit guarantee.

    A name or id written as an identifier (``find_order``, ``findOrder``,
    ``orders.find_order``) is always a mention. Written as plain words ("find
    order"), a phrase counts only when it carries at least two content words, so
    everyday phrases such as "help me" do not trigger a tool called ``help_me``.
    """

    def __init__(self, specs: Sequence[ToolSpec], df: Mapping[str, int]) -> None:
        # the learned ranker's per-tool field terms, and the stored calibration, ride along:
        # this index is rebuilt whenever the catalog changes, and so are they
        self.fields = FieldTerms.of(spec.card for spec in specs)
        self.idf = idf_of(df, len(specs))
        self.calibration: Calibration | None = None
        self.calibration_read = False
        self.phrases: dict[str, list[tuple[str, str]]] = {}
        self.identifiers: dict[str, list[tuple[str, str]]] = {}
        for spec in specs:
            card = spec.card
            for why, raw in (("id", card.id), ("name", card.name)):
                self._add(self.identifiers, phrase_key(raw), card.id, why)
                if _content_words(raw) >= 2 or _rare_single_word(raw, df):
                    self._add(self.phrases, phrase_key(raw), card.id, why)
            for alias in card.aliases:
                if _content_words(alias) >= 2:
                    self._add(self.phrases, phrase_key(alias), card.id, "alias")
        #: the first word of every phrase: a request's other words start no mention
        self.starts = frozenset(key.split(" ", 1)[0] for key in self.phrases)

    @staticmethod
    def _add(table: dict[str, list[tuple[str, str]]], key: str, tool_id: str, why: str) -> None:
        if not key or len(key.split()) > MAX_PHRASE_WORDS:
            return
        bucket = table.setdefault(key, [])
        if all(t != tool_id for t, _ in bucket):
            bucket.append((tool_id, why))

    def find(
        self,
        text: str,
        allowed: Set[str],
        *,
        resolve: bool = True,
        cards: Mapping[str, CapabilityCard] | None = None,
    ) -> dict[str, str]:
        """Tool ids mentioned verbatim in ``text`` (entitled ones only), with why.

        A name several entitled tools share (``Search Movies`` on three services), said
        within a longer request, mentions only those the request also qualifies
        (:func:`qualified`); none when it qualifies none of them: retrieval ranks them. A
        request that is the name and nothing else asks for every tool of that name.
        ``resolve=False``: every tool of the name, always.

        ``cards``: the entitled cards by id (``Entitlement.by_id``). With them, of the
        copies of a name the request cannot tell apart by their ids, the mention goes to
        the copy most specific to the caller (:func:`closest`: the caller's own tenant's
        before the platform-wide one); the others are left to retrieval. Only ever a
        subset of the entitled tools the name matched: nothing is widened."""
        found: dict[str, str] = {}
        request: frozenset[str] | None = None
        whole = phrase_key(text)

        def take(entries: Sequence[tuple[str, str]], key: str) -> None:
            nonlocal request
            entries = [(t, why) for t, why in entries if t in allowed]
            if resolve and key != whole and len({t for t, _ in entries}) > 1:
                request = word_forms(text) if request is None else request
                ids = list(dict.fromkeys(t for t, _ in entries))
                kept = qualified(ids, request)
                if cards is not None and len(kept) != 1:
                    kept = closest(sorted(kept) if kept else ids, cards) or kept
                entries = [(t, why) for t, why in entries if t in kept]
            for tool_id, why in entries:
                if tool_id not in found:
                    found[tool_id] = why

        # a kept index is read per key: each table's keys of this request in one read
        idents = [phrase_key(token) for token in identifiers(text)]
        read_ahead(self.identifiers, idents)
        for key in idents:
            got = self.identifiers.get(key)
            if got:  # most keys name nothing: no call for them
                take(got, key)
        tokens = words(text)
        distinct = set(tokens)
        read_ahead(self.starts, distinct)
        begin = {w for w in distinct if w in self.starts}  # each word looked up once
        starts = [i for i, w in enumerate(tokens) if w in begin]
        # shortest first: the order mentions are found in
        keys = [
            " ".join(tokens[i : i + n])
            for n in range(1, MAX_PHRASE_WORDS + 1)
            for i in starts
            if i + n <= len(tokens)
        ]
        read_ahead(self.phrases, keys)
        phrases = self.phrases
        for key in keys:
            got = phrases.get(key)
            if got:
                take(got, key)
        return found


def qualified(tool_ids: Sequence[str], request: Set[str]) -> frozenset[str]:
    """Of several tools one name fits, those the request also names by a word of their id
    that the others' ids lack (``Search Movies`` with ``imdb`` in the request: the
    ``imdb::search_movies`` one). A word every one of them has, a stop word or a lone
    letter tells none of them apart. Tools whose ids read the same words
    (``CalculateTax``, ``calculate_tax``) are one name spelt twice: no request can tell
    them apart, so the mention keeps them all."""
    if len({tuple(words(t)) for t in tool_ids}) == 1:
        return frozenset(tool_ids)
    own = {t: frozenset(w for w in word_forms(t) if _telling(w)) for t in tool_ids}
    common = frozenset.intersection(*own.values()) if own else frozenset()
    return frozenset(t for t, ws in own.items() if (ws - common) & request)


def closest(tool_ids: Sequence[str], cards: Mapping[str, CapabilityCard]) -> frozenset[str]:
    """Of copies of one name a request cannot tell apart, the one most specific to the
    caller: the tool offered to the fewest tenants. A caller is entitled to a tool
    offered to named tenants only if its own tenant is one of them, and to an untenanted
    one as every tenant is, so among the entitled copies the narrowest offer is the
    caller's own tenant's copy, before one it shares with other tenants, before the
    platform-wide one. Empty (nothing told apart) when every copy is offered alike (a
    catalog without tenants), when a card is unknown, or when the narrowest offer holds
    tools of different ids (the caller's own ``Search Movies`` on two services: those
    are two tools, which retrieval ranks)."""
    reach: dict[str, float] = {}
    for tool_id in tool_ids:
        card = cards.get(tool_id)
        if card is None:
            return frozenset()
        reach[tool_id] = _reach(card)
    least = min(reach.values(), default=float("inf"))
    near = [t for t, r in reach.items() if r == least]
    if len(near) == len(reach) or len({tuple(words(t)) for t in near}) > 1:
        return frozenset()
    return frozenset(near)


def closest_first(
    ids: Sequence[str], cards: Mapping[str, CapabilityCard], request: str
) -> list[str]:
    """``ids`` (a ranking) with the copies of each name reordered among the places they
    hold, the copy offered to the fewest tenants first (:func:`closest`'s order: the
    caller's own before one shared by a few, before the platform-wide one; ties keep
    their order). Only copies the request does not tell apart move: of a name whose ids
    the request qualifies (:func:`qualified`: ``shared`` or ``v1`` written in it), the
    ranking is left as it is. Which names hold which places never changes, and no id is
    added or dropped; with no tenants in the catalog, nothing moves. ``request``: the
    request's text (its :func:`word_forms` are made only when a name holds two places)."""
    groups: dict[str, list[int]] = {}
    for i, tool_id in enumerate(ids):
        card = cards.get(tool_id)
        if card is not None:
            groups.setdefault(card.name, []).append(i)
    out = list(ids)
    forms: frozenset[str] | None = None
    for places in groups.values():
        if len(places) < 2:
            continue
        group = [ids[i] for i in places]
        reach = [_reach(cards[t]) for t in group]
        if min(reach) == max(reach):
            continue
        forms = word_forms(request) if forms is None else forms
        told = qualified(group, forms)
        if told and len(told) < len(group):
            continue  # the request names one of them: its ranking stands
        ordered = [t for _, _, t in sorted(zip(reach, range(len(group)), group, strict=True))]
        for i, tool_id in zip(places, ordered, strict=True):
            out[i] = tool_id
    return out


def _reach(card: CapabilityCard) -> float:
    """How many tenants ``card`` is offered to (every tenant: infinitely many)."""
    return len(card.tenants) if card.tenants else float("inf")


def word_forms(text: str) -> frozenset[str]:
    """:func:`words` of ``text`` and each of its ASCII runs whole, lower-cased: ``IMDb``
    is ``im``, ``db`` and ``imdb``, so a request that writes ``imdb`` or ``IMDb`` names it."""
    return frozenset((*words(text), *(run.lower() for run in _RUN_RE.findall(text))))


def _telling(word: str) -> bool:
    return word not in STOPWORDS and (len(word) > 1 or not word.isascii())


def _content_words(text: str) -> int:
    return sum(1 for w in words(text) if w not in STOPWORDS and not w.isdigit())


def _rare_single_word(text: str, df: Mapping[str, int]) -> bool:
    """A one-word name is a mention only when the word is long and rare in the catalog."""
    ws = words(text)
    if len(ws) != 1 or len(ws[0]) < 4 or ws[0] in STOPWORDS:
        return False
    return df.get(stem(ws[0]), 0) <= 3
