"""Retrieval over entitled cards: lexical + dense, fused; exact hits; reformulation.

The :class:`Retriever` runs one request (its parts, its reformulations) through both
lists and the learned ranker; what a request is and the names it mentions verbatim are
in :mod:`~toolscout.discovery.query`, how candidates' scores are fused and the shortlist
selected in :mod:`~toolscout.discovery.fusion`.

Every function here is plain: it takes the store, the embedder, the query and
the allowed ids, and returns ids with scores. Nothing here reads schemas.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from toolscout.cards import ToolSpec
from toolscout.discovery import coverage, crosslingual
from toolscout.discovery import parts as parts_gate
from toolscout.discovery.beside import searched_beside
from toolscout.discovery.calibrate import (
    BLEND,
    LEAD,
    ORDER_PRIOR,
    PLATT,
    Calibration,
    Ranker,
    calibrate,
)
from toolscout.discovery.features import FieldTerms
from toolscout.discovery.fusion import ADAPT_SHIFT as ADAPT_SHIFT
from toolscout.discovery.fusion import DEDUPE_YIELD as DEDUPE_YIELD
from toolscout.discovery.fusion import LEARNED_WEIGHT as LEARNED_WEIGHT
from toolscout.discovery.fusion import NEAR_DUPLICATE_COSINE as NEAR_DUPLICATE_COSINE
from toolscout.discovery.fusion import VOTE_SATURATION as VOTE_SATURATION
from toolscout.discovery.fusion import Candidate as Candidate
from toolscout.discovery.fusion import Retrieval as Retrieval
from toolscout.discovery.fusion import _add_votes as _add_votes
from toolscout.discovery.fusion import _confidence as _confidence
from toolscout.discovery.fusion import _dense_weight as _dense_weight
from toolscout.discovery.fusion import _fuse as _fuse
from toolscout.discovery.fusion import keep_list_firsts as keep_list_firsts
from toolscout.discovery.fusion import select as select
from toolscout.discovery.fusion import vote as vote
from toolscout.discovery.fusion import within_budget as within_budget
from toolscout.discovery.gates import step_on
from toolscout.discovery.intents import IntentSplitter, interleave, split_intents
from toolscout.discovery.kept import read_ahead
from toolscout.discovery.languagespace import without_language
from toolscout.discovery.lexical import (
    terms,
)
from toolscout.discovery.orders import ORDER_MARGIN, SHAPES, choose
from toolscout.discovery.parts import (
    COVER_CONFIDENCE,
    PartRanking,
    joint_order,
    part_terms,
    parts_disagree,
    request_parts,
)
from toolscout.discovery.pseudo import SEED as PSEUDO_SEED
from toolscout.discovery.query import PhraseIndex as PhraseIndex
from toolscout.discovery.query import Query as Query
from toolscout.discovery.query import parse_query as parse_query
from toolscout.discovery.query import prune_frequent as prune_frequent
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

#: how many past queries vote; their vote weighs as much as they agree (the share of the
#: vote its favourite tool got), times ``fusion.LEARNED_WEIGHT``
LEARNED_NEIGHBOURS = 40

#: BM25 weight of each lexical field (a name hit says most, a parameter hit least)
FIELD_WEIGHTS: Mapping[str, float] = {
    "name": 4.0,
    "aliases": 2.5,
    "tags": 1.5,
    "summary": 1.0,
    "params": 0.6,
    "learned": 1.5,
}
#: the store meta key the catalog's calibration is kept under
CALIBRATION_META = "calibration"


class Reformulator(Protocol):
    """A pluggable query rewriter (an LLM, a thesaurus...). Returns extra query texts."""

    def rewrite(self, query: str) -> Sequence[str]: ...


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


def read_features_ahead(fields: FieldTerms, query_terms: Sequence[str], ids: Sequence[str]) -> None:
    """What the ranker's overlap features read of a kept catalog (discovery/kept.py: one
    store read a key) for ``query_terms`` and the tools ``ids`` among whose names they
    are, read in one store read a table instead."""
    read_ahead(fields.in_name, query_terms)
    read_ahead(fields.in_summary, query_terms)
    pool = frozenset(ids)
    named = {t for term in query_terms for t in fields.in_name.get(term, frozenset()) & pool}
    read_ahead(fields.name, named)


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
        blend = BLEND if self.settings.ranker_blend is None else self.settings.ranker_blend
        chosen = chosen_orders(cal, self.settings)
        lead = chosen is None and cal.leads_lexical(self.settings.lexical_lead_margin)
        order_prior = self.settings.ranker_order_prior
        order_prior = ORDER_PRIOR if order_prior is None else order_prior or None
        self.ranker = Ranker(
            weights,
            none_bias,
            index.fields,
            index.idf,
            self.settings.confidence_platt or PLATT,
            blend,
            LEAD if lead else 0.0,
            orders=chosen or ("ranker", "ranker"),
            floor=self.settings.ranker_floor,
            order_weights=cal.order_weights_over(order_prior) if order_prior else None,
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

    def calibrate(self, specs: Sequence[ToolSpec], seed: int = PSEUDO_SEED) -> Calibration:
        """Fit this catalog's ranker on pseudo-queries made from ``specs`` (no real query;
        ``seed``: the pseudo-queries', the shipped one unless a screen asks for another)."""
        allowed = frozenset(s.id for s in specs)
        return calibrate(
            specs,
            lambda texts, vecs: self.pools(texts, vecs, allowed),
            self.phrases.fields,
            self.phrases.idf,
            embed=lambda texts: self._embed_all(_embed_keys(texts), cache=False),
            seed=seed,
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

    def run(
        self, query: Query, allowed: Set[str], lex: Hits | None = None, *, other: bool = False
    ) -> Retrieval:
        """Retrieve for the whole request and, when it asks for several tasks, for each
        (``lex``: the request's BM25 hits when the caller already has them); a long request
        of several parts is also retrieved part by part (discovery/parts.py). The request
        is read as :meth:`for_request` says, whoever calls: a request the rule reads by the
        dense path alone is retrieved without BM25 (``lex`` unread), after its words are
        carried over to the catalog's when they can be (discovery/crosslingual.py); its
        vectors lose their language's component (``other``, discovery/languagespace.py)."""
        bridge = crosslingual.bridged(self, query)
        if bridge is not query:  # its words carried over to the catalog's (crosslingual.py)
            led = self.for_request(query)
            return crosslingual.merged(
                self.run(bridge, allowed, other=True), lambda: led.run(query, allowed, other=True)
            )
        led = self.for_request(query)
        if led is not self:
            return led.run(query, allowed, other=True)
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
        if self.settings.dense and vectors is None:
            # the encoder on this thread (the longer path: no hand-off before it starts) and
            # BM25 beside it on the pool's, the whole request's and its parts' (beside.py)
            lexed = [part_terms(p, query.terms) for p in parts or pieces]
            lexed = lexed if self.settings.lexical and piece_lex is None else []
            vectors, got, beside = searched_beside(
                lambda: self._embed_all(keys, pooled=pooled),
                lambda ts: self._lex(ts, allowed),
                query.terms if lex is None else None,
                lexed,
            )
            lex = got if lex is None else lex
            piece_lex = beside if lexed else piece_lex
        elif lex is None:
            lex = self._lex(query.terms, allowed)
        if other and vectors is not None:  # read as another language: its component out
            vectors = list(without_language(self.embedder, np.stack(vectors), store=self.store))
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
            read_features_ahead(ranker.fields, query_terms, (*lex.ids, *dense.ids))
            ranked, conf = ranker.rank(query_terms, lex, dense, parts)
            cands = [Candidate(t, lx, d, f) for t, f, lx, d in ranked]  # id, lexical, dense, fused
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
