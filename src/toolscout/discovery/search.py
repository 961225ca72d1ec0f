"""Retrieval over entitled cards: lexical + dense, fused; exact hits; reformulation; selection.

Every function here is plain: it takes the store, the embedder, the query and
the allowed ids, and returns ids with scores. Nothing here reads schemas.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence, Set
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from toolscout.cards import ToolSpec
from toolscout.discovery import coverage, crosslingual
from toolscout.discovery import parts as parts_gate
from toolscout.discovery.calibrate import (
    BLEND,
    LEAD,
    PLATT,
    Calibration,
    FieldTerms,
    Ranker,
    calibrate,
    idf_of,
)
from toolscout.discovery.focus import focus
from toolscout.discovery.gates import step_on
from toolscout.discovery.intents import IntentSplitter, interleave, split_intents
from toolscout.discovery.lexical import (
    STOPWORDS,
    identifiers,
    phrase_key,
    stem,
    terms,
    words,
)
from toolscout.discovery.orders import ORDER_MARGIN, SHAPES, choose, covered
from toolscout.discovery.parts import (
    COVER_CONFIDENCE,
    PartRanking,
    joint_order,
    part_terms,
    parts_disagree,
    request_parts,
)
from toolscout.discovery.queryvectors import QUERY_EMBED_WORDS as QUERY_EMBED_WORDS
from toolscout.discovery.queryvectors import QUERY_VECTOR_CACHE as QUERY_VECTOR_CACHE
from toolscout.discovery.queryvectors import cached, encoded, pools_pieces
from toolscout.discovery.queryvectors import clear_query_cache as clear_query_cache
from toolscout.discovery.queryvectors import embed_keys as _embed_keys
from toolscout.embed.base import Embedder, normalise
from toolscout.errors import QueryError
from toolscout.settings import SearchSettings
from toolscout.stores.base import (
    KIND_ALIAS,
    KIND_CARD,
    KIND_LEARNED,
    Hits,
    Store,
    Vector,
    learned_kind,
)

#: a query term found in more than this share of documents is dropped (when others remain)
FREQUENT_TERM_SHARE = 0.08
#: ... and, in large catalogs, one found in more than this many documents: BM25 cost grows
#: with the posting lists it walks, so this bounds lexical latency at 100k tools
FREQUENT_TERM_MAX_DOCS = 1000
#: the longest name or alias phrase looked for verbatim in a query, in words
MAX_PHRASE_WORDS = 8
#: how many past queries vote; their vote weighs as much as they agree (the share of the
#: vote its favourite tool got), times this cap
LEARNED_NEIGHBOURS = 40
LEARNED_WEIGHT = 1.0
#: the summed sim**3 at which the vote is fully trusted (e.g. one past query at cosine 0.8)
VOTE_SATURATION = 0.5
#: BM25 weight of each lexical field (a name hit says most, a parameter hit least)
FIELD_WEIGHTS: Mapping[str, float] = {
    "name": 4.0,
    "aliases": 2.5,
    "tags": 1.5,
    "summary": 1.0,
    "params": 0.6,
    "learned": 1.5,
}
#: the most dense weight adaptive fusion moves to lexical
ADAPT_SHIFT = 0.1
#: two tools whose card vectors are at least this close are near-duplicates
NEAR_DUPLICATE_COSINE = 0.97
#: a near-duplicate gives way only to a distinct tool scoring at least this share of its
#: score: chosen on data (leave-one-set-out, with calibrate.BLEND, by benchmarks/quality.py)
DEDUPE_YIELD = 0.5
#: the store meta key the catalog's calibration is kept under
CALIBRATION_META = "calibration"


class Reformulator(Protocol):
    """A pluggable query rewriter (an LLM, a thesaurus...). Returns extra query texts."""

    def rewrite(self, query: str) -> Sequence[str]: ...


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    terms: tuple[str, ...]
    dropped: tuple[str, ...]
    identifiers: tuple[str, ...]


@dataclass(slots=True)
class Candidate:
    id: str
    lexical: float = 0.0  # BM25 normalised to [0, 1] within this query
    dense: float = 0.0  # cosine
    fused: float = 0.0
    exact: str = ""  # "", "name", "id" or "alias": why it is guaranteed
    needed_by: str = ""  # the shortlisted tool this one finds an identifier for

    def rescored(self, fused: float) -> Candidate:
        """This candidate with another fused score: ``replace(self, fused=fused)`` without
        ``replace``'s field-by-field introspection (every field above is passed)."""
        return Candidate(self.id, self.lexical, self.dense, fused, self.exact, self.needed_by)


@dataclass(slots=True)
class Retrieval:
    candidates: list[Candidate]
    confidence: float
    low_confidence: bool
    dense_weight: float
    reformulations: list[str] = field(default_factory=list)
    lexical_ids: list[str] = field(default_factory=list)
    dense_ids: list[str] = field(default_factory=list)
    #: the tasks the request was split into (one: a single-intent request)
    intents: list[str] = field(default_factory=list)
    #: the parts a long request was read in (discovery/parts.py; none: read whole)
    parts: list[str] = field(default_factory=list)


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
    kept, dropped = prune_frequent(list(dict.fromkeys(terms(text))), df, n_docs)
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

    def find(self, text: str, allowed: Set[str]) -> dict[str, str]:
        """Tool ids mentioned verbatim in ``text`` (entitled ones only), with why."""
        found: dict[str, str] = {}

        def take(entries: Sequence[tuple[str, str]]) -> None:
            for tool_id, why in entries:
                if tool_id in allowed and tool_id not in found:
                    found[tool_id] = why

        for token in identifiers(text):
            take(self.identifiers.get(phrase_key(token), ()))
        tokens = words(text)
        starts = [i for i, w in enumerate(tokens) if w in self.starts]
        for n in range(1, MAX_PHRASE_WORDS + 1):  # shortest first: the order mentions are found in
            for i in starts:
                if i + n <= len(tokens):
                    take(self.phrases.get(" ".join(tokens[i : i + n]), ()))
        return found


def _content_words(text: str) -> int:
    return sum(1 for w in words(text) if w not in STOPWORDS and not w.isdigit())


def _rare_single_word(text: str, df: Mapping[str, int]) -> bool:
    """A one-word name is a mention only when the word is long and rare in the catalog."""
    ws = words(text)
    if len(ws) != 1 or len(ws[0]) < 4 or ws[0] in STOPWORDS:
        return False
    return df.get(stem(ws[0]), 0) <= 3


def _dense_weight(query: Query, lex: Hits, settings: SearchSettings) -> float:
    """Lean towards lexical when one tool clearly wins on BM25 (a rare exact term matched).

    The lexical margin ``(s1 - s2) / s1`` measures how sure BM25 is; a clear
    winner moves up to ``ADAPT_SHIFT`` of the weight from dense to lexical.
    """
    w = settings.dense_weight
    if not settings.adaptive_fusion or not settings.lexical or len(lex.scores) < 2:
        return w
    if lex.scores[0] <= 0:
        return w
    margin = (lex.scores[0] - lex.scores[1]) / lex.scores[0]
    return max(w - ADAPT_SHIFT * min(margin / 0.5, 1.0), 0.0)


def _fuse(lex: Hits, dense: Hits, weight: float, settings: SearchSettings) -> list[Candidate]:
    cands: dict[str, Candidate] = {}
    top_lex = lex.scores[0] if lex.scores else 0.0
    for tid, s in zip(lex.ids, lex.scores, strict=True):
        cands[tid] = Candidate(tid, lexical=s / top_lex if top_lex > 0 else 0.0)
    for tid, s in zip(dense.ids, dense.scores, strict=True):
        cands.setdefault(tid, Candidate(tid)).dense = s
    if settings.fusion == "rrf":
        lex_rank = {t: r for r, t in enumerate(lex.ids)}
        dense_rank = {t: r for r, t in enumerate(dense.ids)}
        for c in cands.values():
            c.fused = (1 - weight) * _rrf(lex_rank.get(c.id)) + weight * _rrf(dense_rank.get(c.id))
    else:
        lo = min(dense.scores) if dense.scores else 0.0
        hi = max(dense.scores) if dense.scores else 1.0
        span = hi - lo if hi > lo else 1.0
        for c in cands.values():
            dn = (c.dense - lo) / span if dense.scores else 0.0
            c.fused = weight * dn + (1 - weight) * c.lexical
    return sorted(cands.values(), key=lambda c: (-c.fused, c.id))


def vote(neighbours: Sequence[tuple[str, float]]) -> Hits:
    """Tools ranked by a nearest-neighbour vote: each neighbour adds sim**3 to its tool."""
    votes: dict[str, float] = {}
    for tid, sim in neighbours:
        votes[tid] = votes.get(tid, 0.0) + max(sim, 0.0) ** 3
    ranked = sorted(votes.items(), key=lambda kv: -kv[1])
    return Hits([t for t, _ in ranked], [v for _, v in ranked])


def _add_votes(cands: list[Candidate], votes: Hits) -> None:
    """Blend the usage-history vote into the fused scores (in place, re-sorted)."""
    if not votes.ids:
        return
    top = votes.scores[0] or 1.0
    by_id = {c.id: c for c in cands}
    for tid in votes.ids:
        if tid not in by_id:
            by_id[tid] = Candidate(tid)
            cands.append(by_id[tid])
    share = {tid: v / top for tid, v in zip(votes.ids, votes.scores, strict=True)}
    # trust the vote as far as the neighbours agree (all for one tool, not spread over
    # many) and are close (sim**3 summed: a few near-paraphrases, not many distant queries)
    agreement = top / (sum(votes.scores) or 1.0)
    weight = LEARNED_WEIGHT * agreement * min(top / VOTE_SATURATION, 1.0)
    for c in cands:
        c.fused = (1 - weight) * c.fused + weight * share.get(c.id, 0.0)
    cands.sort(key=lambda c: (-c.fused, c.id))


def keep_list_firsts(out: Retrieval, at: int) -> list[Candidate]:
    """The coverage rule (``SearchSettings.ranker_cover``): the final order of a retrieval
    with the first hit of its BM25 list and of its dense list within the first ``at``
    places (:func:`orders.covered`); a moved candidate scores just under the one before it."""
    cands = out.candidates
    where = {c.id: i for i, c in enumerate(cands)}
    firsts = [where[ids[0]] for ids in (out.lexical_ids, out.dense_ids) if ids and ids[0] in where]
    order, _ = covered(range(len(cands)), [c.fused for c in cands], firsts, at)
    moved = {i for i in order[:at] if i >= at}
    new: list[Candidate] = []
    for i in order:
        c = cands[i]
        new.append(c.rescored(new[-1].fused * (1 - 1e-6)) if i in moved and new else c)
    return new


def _rrf(rank: int | None, k: int = 60) -> float:
    return 0.0 if rank is None else 1.0 / (k + rank + 1)


def _confidence(cands: Sequence[Candidate], dense_on: bool) -> float:
    """The heuristic confidence of the fixed fusions (the learned one has a calibrated one)."""
    if not cands:
        return 0.0
    top = cands[0]
    if dense_on:
        # MiniLM cosines: ~0.15 unrelated, >= 0.6 a clear paraphrase
        return float(min(max((top.dense - 0.15) / 0.45, 0.0), 1.0))
    return float(min(top.lexical, 1.0) * (1.0 if len(cands) < 2 else 1 - 0.5 * cands[1].lexical))


_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def chosen_orders(cal: Calibration, settings: SearchSettings) -> tuple[str, str] | None:
    """The orders (whole, in parts) the learned ranker uses on this catalog: forced by
    ``settings.ranker_order``, else chosen from the calibration (discovery/orders.py) when
    the choice is on; None when it is off (the ranker's order and the lexical lead)."""
    if settings.ranker_order is not None:
        single, _, multi = settings.ranker_order.partition("/")
        return single, multi or single
    margin = ORDER_MARGIN if settings.order_margin is None else settings.order_margin
    if margin is None or not cal.fitted:
        return None
    single, multi = (choose(cal.orders, shape, margin) for shape in SHAPES)
    return single, multi


def _pool() -> ThreadPoolExecutor:
    """The threads BM25 runs on beside the query encoder, created on first use (no side
    effect on import)."""
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=2, thread_name_prefix="toolscout-bm25"))
        return _POOL[0]


@dataclass(slots=True)
class Retriever:
    """Runs one query over a store restricted to ``allowed`` ids."""

    store: Store
    embedder: Embedder
    phrases: PhraseIndex
    settings: SearchSettings
    reformulator: Reformulator | None = None
    card_vectors: Callable[[Sequence[str]], Mapping[str, Vector]] | None = None
    #: the catalog's calibrated ranker (``fusion="learned"``); None falls back to "weighted"
    ranker: Ranker | None = None
    splitter: IntentSplitter | None = None
    #: whose usage-learned phrases vote (besides untenanted ones): never another tenant's
    tenant: str = ""

    @property
    def kinds(self) -> frozenset[str]:
        """The catalog's own vectors; learned queries vote separately (:meth:`_learned`)."""
        return frozenset({KIND_CARD, KIND_ALIAS})

    def _learned(self, vector: Vector | None, allowed: Set[str]) -> Hits:
        if vector is None or not self.settings.learned_aliases:
            return Hits()
        kinds = [KIND_LEARNED] + ([learned_kind(self.tenant)] if self.tenant else [])
        near = [
            n
            for kind in kinds
            for n in self.store.neighbours(
                vector, allowed, kind=kind, k=LEARNED_NEIGHBOURS, model_id=self.embedder.model_id
            )
        ]
        near.sort(key=lambda n: -n[1])
        return vote(near[:LEARNED_NEIGHBOURS])

    def lexical(self, query_terms: Sequence[str], allowed: Set[str]) -> Hits:
        """BM25 over the allowed tools (what :meth:`run` fuses; pass it back as ``lex``)."""
        return self._lex(query_terms, allowed)

    def _lex(self, query_terms: Sequence[str], allowed: Set[str]) -> Hits:
        if not self.settings.lexical:
            return Hits()
        weights = dict(FIELD_WEIGHTS)
        if not self.settings.learned_aliases:
            weights["learned"] = 0.0
        return self.store.lexical(
            query_terms, allowed, self.settings.candidate_pool, weights=weights
        )

    def _dense(self, vector: Vector | None, allowed: Set[str], also: Sequence[str]) -> Hits:
        if vector is None:
            return Hits()
        return self.store.dense(
            vector,
            allowed,
            self.settings.candidate_pool,
            kinds=self.kinds,
            also=also,
            model_id=self.embedder.model_id,
        )

    def learned_ranker(self) -> Ranker | None:
        """The ranker ``fusion="learned"`` uses: the catalog's calibration (or the prior)."""
        if self.ranker is not None or self.settings.fusion != "learned":
            return self.ranker
        index = self.phrases
        if not index.calibration_read:
            raw = self.store.meta(CALIBRATION_META)
            index.calibration = Calibration.from_json(raw) if raw else None
            index.calibration_read = True
        cal = index.calibration or Calibration()
        weights, none_bias = cal.weights_over(self.settings.ranker_prior)
        blend = self.settings.ranker_blend
        chosen = chosen_orders(cal, self.settings)
        lead = chosen is None and cal.leads_lexical(self.settings.lexical_lead_margin)
        self.ranker = Ranker(
            weights,
            none_bias,
            index.fields,
            index.idf,
            self.settings.confidence_platt or PLATT,
            BLEND if blend is None else blend,
            LEAD if lead else 0.0,
            orders=chosen or ("ranker", "ranker"),
            floor=self.settings.ranker_floor,
        )
        return self.ranker

    def pools(
        self, texts: Sequence[str], vectors: Sequence[Vector], allowed: Set[str]
    ) -> list[tuple[Sequence[str], Hits, Hits]]:
        """(query terms, lexical hits, dense hits) of each text: what the ranker scores."""
        df, n_docs = self.store.document_frequency()
        out: list[tuple[Sequence[str], Hits, Hits]] = []
        for text, vec in zip(texts, vectors, strict=True):
            try:
                q = parse_query(text[: self.settings.max_query_chars], df, n_docs, self.settings)
            except QueryError:
                q = Query(text, (), (), ())
            lex = self._lex(q.terms, allowed)
            out.append((q.terms, lex, self._dense(vec, allowed, lex.ids)))
        return out

    def calibrate(self, specs: Sequence[ToolSpec]) -> Calibration:
        """Fit this catalog's ranker on pseudo-queries made from ``specs`` (no real query)."""
        allowed = frozenset(s.id for s in specs)
        return calibrate(
            specs,
            lambda texts, vecs: self.pools(texts, vecs, allowed),
            self.phrases.fields,
            self.phrases.idf,
            embed=lambda texts: self._embed_all(_embed_keys(texts), cache=False),
            start=self.settings.ranker_prior,
            blend=BLEND if self.settings.ranker_blend is None else self.settings.ranker_blend,
            measure_orders=self.settings.order_margin is not None or ORDER_MARGIN is not None,
        )

    def for_request(self, query: Query) -> Retriever:
        """This retriever as the coverage rule reads ``query`` (discovery/coverage.py):
        itself, or a copy that ranks by the dense path alone when the catalog's words barely
        cover the request and the query encoder reads other languages. With any other
        encoder (the English default) it returns before reading anything."""
        if not coverage.may_lead(self.settings, self.embedder):
            return self
        df, _ = self.store.document_frequency()
        led = coverage.dense_led(self.settings, (*query.terms, *query.dropped), df, self.embedder)
        return self if led is self.settings else replace(self, settings=led)

    def run(self, query: Query, allowed: Set[str], lex: Hits | None = None) -> Retrieval:
        """Retrieve for the whole request and, when it asks for several tasks, for each
        (``lex``: the request's BM25 hits when the caller already has them); a long request
        of several parts is also retrieved part by part (discovery/parts.py). The request
        is read as :meth:`for_request` says, whoever calls: a request the rule reads by the
        dense path alone is retrieved without BM25 (``lex`` unread), after its words are
        carried over to the catalog's when they can be (discovery/crosslingual.py)."""
        bridge = crosslingual.bridged(self, query)
        if bridge is not query:  # its words carried over to the catalog's (crosslingual.py)
            led = self.for_request(query)
            return crosslingual.merged(self.run(bridge, allowed), lambda: led.run(query, allowed))
        led = self.for_request(query)
        if led is not self:
            return led.run(query, allowed)
        parts = split_intents(query.text, self.splitter) if self.settings.multi_intent else []
        parts = parts if len(parts) > 1 else []
        read_in_parts = step_on("parts", query.text, self.settings)
        pieces = request_parts(query.text) if read_in_parts and not parts else []
        piece_lex: list[Hits] | None = None
        pooled = False
        if pieces and self.settings.lexical and parts_gate.DISAGREE_RANK is not None:
            # the parts are read only when one points elsewhere lexically (parts.py); their
            # BM25 hits are kept for their retrieval, the whole request's for its own
            lex = self._lex(query.terms, allowed) if lex is None else lex
            piece_lex = [self._lex(part_terms(p, query.terms), allowed) for p in pieces]
            if not parts_disagree(lex.ids, [h.ids[0] for h in piece_lex if h.ids]):
                if parts_gate.AGREEING == "pooled":
                    # pooled from the request's own encoder run (discovery/queryvectors.py)
                    pooled = pools_pieces(self.embedder, len(pieces))
                else:
                    pieces, piece_lex = [], None
        keys = _embed_keys([query.text, *parts, *pieces])
        vectors = self._cached(keys, pooled) if self.settings.dense else None
        if lex is not None:
            if self.settings.dense and vectors is None:
                vectors = self._embed_all(keys, pooled=pooled)
        elif self.settings.dense and vectors is None:
            # the encoder on this thread (the longer path: no hand-off before it starts) and
            # BM25 beside it on the pool's (ONNX Runtime and SQLite both release the GIL)
            pending = _pool().submit(self._lex, query.terms, allowed)
            vectors = self._embed_all(keys, pooled=pooled)
            lex = pending.result()
        else:
            lex = self._lex(query.terms, allowed)
        vector = vectors[0] if vectors is not None else None

        reformulating = step_on("reformulate", query.text, self.settings)

        def whole(shape: int) -> Retrieval:
            out = self._once(query, query.terms, vector, allowed, lex, shape)
            if out.low_confidence and reformulating:
                out = self._reformulate(query, vector, allowed, out, lex, shape)
            return out

        out = whole(len(parts) or len(pieces))
        if parts or pieces:
            ranker = self.learned_ranker()
            # a request in parts whose sure parts all point at one tool is one task told at
            # length: it takes the one-part order when that differs (discovery/orders.py)
            again = ranker is not None and ranker.orders[0] != ranker.orders[1]
            out = self._per_piece(
                query, parts or pieces, vectors, allowed, out, joint=not parts,
                one_task=(lambda: whole(0)) if again else None, lexes=piece_lex,
            )  # fmt: skip
        if self.settings.ranker_cover and self.learned_ranker() is not None:
            out.candidates = keep_list_firsts(out, self.settings.ranker_cover)
        return out

    def _per_piece(
        self,
        query: Query,
        pieces: Sequence[str],
        vectors: Sequence[Vector] | None,
        allowed: Set[str],
        whole: Retrieval,
        *,
        joint: bool,
        one_task: Callable[[], Retrieval] | None = None,
        lexes: Sequence[Hits] | None = None,
    ) -> Retrieval:
        """Rank each piece of the request on its own, with the terms the whole request kept
        (frequent-term pruning as decided for it), then merge: ``joint``, the parts of a
        long request (:func:`joint_order`, every sure part covered); else the tasks of a
        multi-intent request (:func:`interleave`, every task represented early); ``lexes``:
        the pieces' BM25 hits when the caller has them."""
        by_id = {c.id: c for c in whole.candidates}
        rankings: list[PartRanking] = []
        for i, piece in enumerate(pieces):
            sub = Query(piece, part_terms(piece, query.terms), (), ())
            vec = vectors[i + 1] if vectors is not None else None
            got = self._once(sub, sub.terms, vec, allowed, lexes[i] if lexes else None)
            cands = got.candidates[: self.settings.candidate_pool] if joint else got.candidates
            rankings.append(
                PartRanking([c.id for c in cands], [c.fused for c in cands], got.confidence)
            )
            for c in cands:
                by_id.setdefault(c.id, c)
        sure = {r.ids[0] for r in rankings if r.ids and r.confidence >= COVER_CONFIDENCE}
        if one_task is not None and len(sure) < 2:
            whole = one_task()
            by_id.update({c.id: c for c in whole.candidates})
        whole_ids = [c.id for c in whole.candidates]
        if joint:
            order, score = joint_order(whole_ids, [c.fused for c in whole.candidates], rankings)
            whole.candidates = [by_id[t].rescored(score[t]) for t in order]
            whole.parts = list(pieces)
        else:
            order = interleave(whole_ids, [r.ids for r in rankings])
            whole.candidates = [by_id[t] for t in order]
            whole.intents = list(pieces)
        return whole

    def _cached(self, keys: Sequence[str], pooled: bool = False) -> list[Vector] | None:
        """The vectors of ``keys`` (:func:`_embed_keys`) when this process encoded them all."""
        return cached(self.embedder, keys, pooled)

    def _embed_all(
        self, keys: Sequence[str], cache: bool = True, *, pooled: bool = False
    ) -> list[Vector]:
        return encoded(self.embedder, keys, pooled, cache)

    def _embed(self, text: str) -> Vector:
        keys = _embed_keys([text])
        cached = self._cached(keys)
        return cached[0] if cached is not None else self._embed_all(keys)[0]

    def _once(
        self,
        query: Query,
        query_terms: Sequence[str],
        vector: Vector | None,
        allowed: Set[str],
        lex: Hits | None = None,
        parts: int = 0,
    ) -> Retrieval:
        """One ranking of ``query_terms`` and ``vector`` (``parts``: how many parts the
        request is read in, a feature of the learned ranker)."""
        if lex is None:
            lex = self._lex(query_terms, allowed)
        dense = self._dense(vector, allowed, lex.ids)
        weight = self.settings.dense_weight if self.settings.lexical else 1.0
        if not self.settings.dense:
            weight = 0.0
        elif self.settings.lexical:
            weight = _dense_weight(query, lex, self.settings)
        ranker = self.learned_ranker()
        if ranker is not None:
            ranked, conf = ranker.rank(query_terms, lex, dense, parts)
            cands = [Candidate(t, lexical=lx, dense=d, fused=f) for t, f, lx, d in ranked]
        else:
            cands = _fuse(lex, dense, weight, self.settings)
            conf = _confidence(cands, self.settings.dense)
        _add_votes(cands, self._learned(vector, allowed))
        return Retrieval(
            cands,
            conf,
            conf < self.settings.confidence_threshold,
            weight,
            lexical_ids=list(lex.ids),
            dense_ids=list(dense.ids),
        )

    def _reformulate(
        self,
        query: Query,
        vector: Vector | None,
        allowed: Set[str],
        first: Retrieval,
        lex: Hits | None = None,
        parts: int = 0,
    ) -> Retrieval:
        notes: list[str] = []
        extra_terms: list[str] = []
        texts: list[str] = []
        if self.reformulator is not None:
            for alt in self.reformulator.rewrite(query.text):
                if alt.strip() and alt.strip() != query.text:
                    texts.append(alt.strip())
                    extra_terms.extend(terms(alt))
                    notes.append(f"rewrite: {alt.strip()}")
        new_vec = vector
        top = [c.id for c in first.candidates[:3]]
        if vector is not None and top and self.card_vectors is not None:
            # pseudo-relevance feedback (Rocchio) over the first pass's best cards
            fb = [v for v in self.card_vectors(top).values()]
            if fb:
                mixed = vector + 0.5 * np.mean(np.stack(fb), axis=0)
                if texts:
                    mixed = mixed + self.embedder.embed(texts).mean(axis=0)
                new_vec = normalise(mixed[None, :])[0]
                notes.append(f"feedback: top {len(fb)} cards")
        if not notes:
            return first
        merged_terms = list(dict.fromkeys([*query.terms, *extra_terms]))
        # no rewrite added a term: the first pass's BM25 hits are the second's too
        same_terms = merged_terms == list(query.terms)
        second = self._once(
            query, merged_terms, new_vec, allowed, lex if same_terms else None, parts
        )
        # keep the better-supported of the two passes' scores per tool
        best: dict[str, Candidate] = {c.id: c for c in first.candidates}
        for c in second.candidates:
            old = best.get(c.id)
            if old is None or c.fused > old.fused:
                best[c.id] = c
        cands = sorted(best.values(), key=lambda c: (-c.fused, c.id))
        second.candidates = cands
        second.confidence = max(first.confidence, second.confidence)
        second.low_confidence = second.confidence < self.settings.confidence_threshold
        second.reformulations = notes
        second.lexical_ids, second.dense_ids = first.lexical_ids, first.dense_ids
        return second


def select(
    candidates: Sequence[Candidate],
    exact: Mapping[str, str],
    k: int,
    *,
    dedupe: bool,
    card_vectors: Callable[[Sequence[str]], Mapping[str, Vector]] | None,
    token_cost: Callable[[str], int] | None = None,
    token_budget: int | None = None,
    dedupe_yield: float = DEDUPE_YIELD,
) -> list[Candidate]:
    """Top-``k``: exact hits first, then by fused score, near-duplicates pushed back.

    A near-duplicate of a tool already chosen is pushed back only when a distinct
    candidate further down scores at least ``dedupe_yield`` of its score: a copy the
    ranker finds far likelier than anything else keeps its place.
    """
    by_id = {c.id: c for c in candidates}
    forced = [by_id.get(t) or Candidate(t) for t in exact]
    for c in forced:
        c.exact = exact[c.id]
    forced.sort(key=lambda c: -c.fused)
    forced = forced[:k]
    chosen = list(forced)
    rest = [c for c in candidates if c.id not in exact]
    vecs = (
        card_vectors([c.id for c in rest[: 4 * k + 10]] + [c.id for c in forced])
        if (dedupe and card_vectors is not None)
        else {}
    )

    def copies(c: Candidate, of: Sequence[Candidate]) -> bool:
        v = vecs.get(c.id)
        return v is not None and any(
            (w := vecs.get(s.id)) is not None and float(v @ w) >= NEAR_DUPLICATE_COSINE for s in of
        )

    deferred: list[Candidate] = []
    for i, c in enumerate(rest):
        if len(chosen) >= k:
            break
        if copies(c, chosen):
            rival = next((d for d in rest[i + 1 :] if not copies(d, chosen)), None)
            if rival is not None and rival.fused >= dedupe_yield * c.fused:
                deferred.append(c)
                continue
        chosen.append(c)
    for c in deferred:
        if len(chosen) >= k:
            break
        chosen.append(c)
    return within_budget(chosen, token_cost, token_budget)


def within_budget(
    chosen: Sequence[Candidate],
    token_cost: Callable[[str], int] | None,
    token_budget: int | None,
) -> list[Candidate]:
    """``chosen`` in order, leaving out each tool that would overflow ``token_budget``
    (the first is always kept)."""
    if token_budget is None or token_cost is None:
        return list(chosen)
    kept: list[Candidate] = []
    used = 0
    for c in chosen:
        cost = token_cost(c.id)
        if kept and used + cost > token_budget:
            continue
        kept.append(c)
        used += cost
    return kept
