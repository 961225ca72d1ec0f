"""Retrieval over entitled cards: lexical + dense, fused; exact hits; reformulation; selection.

Every function here is plain: it takes the store, the embedder, the query and
the allowed ids, and returns ids with scores. Nothing here reads schemas.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from toolscout.cards import ToolSpec
from toolscout.embed import Embedder, normalise
from toolscout.errors import QueryError
from toolscout.lexical import identifiers, ngrams, phrase_key, terms, words
from toolscout.settings import SearchSettings
from toolscout.store import KIND_ALIAS, KIND_CARD, KIND_LEARNED, Hits, Store, Vector

#: a query term found in more than this share of documents is dropped (when others remain)
FREQUENT_TERM_SHARE = 0.08
#: the longest name or alias phrase looked for verbatim in a query, in words
MAX_PHRASE_WORDS = 8
#: two tools whose card vectors are at least this close are near-duplicates
NEAR_DUPLICATE_COSINE = 0.93


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


@dataclass(slots=True)
class Retrieval:
    candidates: list[Candidate]
    confidence: float
    low_confidence: bool
    dense_weight: float
    reformulations: list[str] = field(default_factory=list)
    lexical_ids: list[str] = field(default_factory=list)
    dense_ids: list[str] = field(default_factory=list)


def parse_query(text: str, df: Mapping[str, int], n_docs: int, settings: SearchSettings) -> Query:
    """Validate and normalise a query; very frequent terms are pruned."""
    if not isinstance(text, str) or not text.strip():
        raise QueryError("the query is empty")
    if len(text) > settings.max_query_chars:
        raise QueryError(
            f"the query is {len(text)} characters long; the limit is {settings.max_query_chars}"
        )
    all_terms = list(dict.fromkeys(terms(text)))
    cutoff = max(FREQUENT_TERM_SHARE * n_docs, 50)
    kept = [t for t in all_terms if df.get(t, 0) <= cutoff]
    dropped = [t for t in all_terms if t not in kept]
    if not kept:  # never prune a query to nothing: keep its rarest terms
        kept = sorted(all_terms, key=lambda t: df.get(t, 0))[:3]
        dropped = [t for t in all_terms if t not in kept]
    return Query(text.strip(), tuple(kept), tuple(dropped), tuple(identifiers(text)))


class PhraseIndex:
    """Names, ids and aliases under their canonical form, for the exact-hit guarantee."""

    def __init__(self, specs: Sequence[ToolSpec], df: Mapping[str, int]) -> None:
        self.phrases: dict[str, list[tuple[str, str]]] = {}
        for spec in specs:
            card = spec.card
            self._add(phrase_key(card.id), card.id, "id", df)
            self._add(phrase_key(card.name), card.id, "name", df)
            for alias in card.aliases:
                if len(words(alias)) >= 2:
                    self._add(phrase_key(alias), card.id, "alias", df)

    def _add(self, key: str, tool_id: str, why: str, df: Mapping[str, int]) -> None:
        if not key:
            return
        parts = key.split()
        if len(parts) == 1:
            # a one-word name is only a reliable mention when the word is rare in the catalog
            word = parts[0]
            stemmed = terms(word)
            if len(word) < 4 or not stemmed or df.get(stemmed[0], 0) > 3:
                return
        if len(parts) > MAX_PHRASE_WORDS:
            return
        bucket = self.phrases.setdefault(key, [])
        if all(t != tool_id for t, _ in bucket):
            bucket.append((tool_id, why))

    def find(self, text: str, allowed: Set[str]) -> dict[str, str]:
        """Tool ids mentioned verbatim in ``text`` (entitled ones only), with why."""
        found: dict[str, str] = {}
        for gram in ngrams(words(text), MAX_PHRASE_WORDS):
            for tool_id, why in self.phrases.get(gram, ()):
                if tool_id in allowed and tool_id not in found:
                    found[tool_id] = why
        return found


def _dense_weight(query: Query, lex: Hits, settings: SearchSettings) -> float:
    """Shift weight to lexical when the query names identifiers or its rare terms match."""
    w = settings.dense_weight
    if not settings.adaptive_fusion or not settings.lexical:
        return w
    if query.identifiers:
        w -= 0.25
    if len(lex.scores) >= 2 and lex.scores[0] > 0:
        gap = (lex.scores[0] - lex.scores[1]) / lex.scores[0]
        w -= 0.2 * min(gap / 0.5, 1.0)
    return min(max(w, 0.2), 0.9)


def _fuse(
    lex: Hits, dense: Hits, weight: float, settings: SearchSettings
) -> list[Candidate]:
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


def _rrf(rank: int | None, k: int = 60) -> float:
    return 0.0 if rank is None else 1.0 / (k + rank + 1)


def _confidence(cands: Sequence[Candidate], dense_on: bool) -> float:
    if not cands:
        return 0.0
    top = cands[0]
    if dense_on:
        # MiniLM cosines: ~0.15 unrelated, >= 0.6 a clear paraphrase
        return float(min(max((top.dense - 0.15) / 0.45, 0.0), 1.0))
    return float(min(top.lexical, 1.0) * (1.0 if len(cands) < 2 else 1 - 0.5 * cands[1].lexical))


@dataclass(slots=True)
class Retriever:
    """Runs one query over a store restricted to ``allowed`` ids."""

    store: Store
    embedder: Embedder
    phrases: PhraseIndex
    settings: SearchSettings
    reformulator: Reformulator | None = None
    card_vectors: Callable[[Sequence[str]], Mapping[str, Vector]] | None = None

    @property
    def kinds(self) -> frozenset[str]:
        base = {KIND_CARD, KIND_ALIAS}
        if self.settings.learned_aliases:
            base.add(KIND_LEARNED)
        return frozenset(base)

    def _lex(self, query_terms: Sequence[str], allowed: Set[str]) -> Hits:
        if not self.settings.lexical:
            return Hits()
        fields = () if self.settings.learned_aliases else ("name", "aliases", "tags", "summary", "params")
        return self.store.lexical(query_terms, allowed, self.settings.candidate_pool, fields=fields)  # type: ignore[call-arg]

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

    def run(self, query: Query, allowed: Set[str]) -> Retrieval:
        vector = self._embed(query.text) if self.settings.dense else None
        out = self._once(query, query.terms, vector, allowed)
        if self.settings.reformulate and out.low_confidence:
            out = self._reformulate(query, vector, allowed, out)
        return out

    def _embed(self, text: str) -> Vector:
        return self.embedder.embed([" ".join(words(text)) or text])[0]

    def _once(
        self, query: Query, query_terms: Sequence[str], vector: Vector | None, allowed: Set[str]
    ) -> Retrieval:
        lex = self._lex(query_terms, allowed)
        dense = self._dense(vector, allowed, lex.ids)
        weight = self.settings.dense_weight if self.settings.lexical else 1.0
        if not self.settings.dense:
            weight = 0.0
        elif self.settings.lexical:
            weight = _dense_weight(query, lex, self.settings)
        cands = _fuse(lex, dense, weight, self.settings)
        conf = _confidence(cands, self.settings.dense)
        return Retrieval(
            cands,
            conf,
            conf < self.settings.confidence_threshold,
            weight,
            lexical_ids=lex.ids[:10],
            dense_ids=dense.ids[:10],
        )

    def _reformulate(
        self, query: Query, vector: Vector | None, allowed: Set[str], first: Retrieval
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
        second = self._once(query, merged_terms, new_vec, allowed)
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
) -> list[Candidate]:
    """Top-``k``: exact hits first, then by fused score, near-duplicates pushed back."""
    by_id = {c.id: c for c in candidates}
    forced = [by_id.get(t) or Candidate(t) for t in exact]
    for c in forced:
        c.exact = exact[c.id]
    forced.sort(key=lambda c: -c.fused)
    forced = forced[:k]
    chosen = list(forced)
    rest = [c for c in candidates if c.id not in exact]
    vecs = card_vectors([c.id for c in rest[: 4 * k + 10]] + [c.id for c in forced]) if (
        dedupe and card_vectors is not None
    ) else {}
    deferred: list[Candidate] = []
    for c in rest:
        if len(chosen) >= k:
            break
        v = vecs.get(c.id)
        if v is not None and any(
            (w := vecs.get(s.id)) is not None and float(v @ w) >= NEAR_DUPLICATE_COSINE
            for s in chosen
        ):
            deferred.append(c)
            continue
        chosen.append(c)
    for c in deferred:
        if len(chosen) >= k:
            break
        chosen.append(c)
    if token_budget is not None and token_cost is not None:
        kept: list[Candidate] = []
        used = 0
        for c in chosen:
            cost = token_cost(c.id)
            if kept and used + cost > token_budget:
                continue
            kept.append(c)
            used += cost
        chosen = kept
    return chosen


def is_finite(x: float) -> bool:
    return math.isfinite(x)
