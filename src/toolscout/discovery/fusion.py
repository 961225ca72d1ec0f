"""Candidates and what is done with their scores: the two lists fused, the usage
history's vote blended in, the coverage rule, the fixed fusions' confidence, and the
shortlist selected from them (exact hits first, near-duplicates pushed back, a token budget).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from toolscout.discovery.orders import covered
from toolscout.discovery.query import Query
from toolscout.settings import SearchSettings
from toolscout.stores.base import Hits, Vector

#: the most the usage history's vote weighs (times how far its neighbours agree)
LEARNED_WEIGHT = 1.0
#: the summed sim**3 at which the vote is fully trusted (e.g. one past query at cosine 0.8)
VOTE_SATURATION = 0.5
#: the most dense weight adaptive fusion moves to lexical
ADAPT_SHIFT = 0.1
#: two tools whose card vectors are at least this close are near-duplicates
NEAR_DUPLICATE_COSINE = 0.97
#: a near-duplicate gives way only to a distinct tool scoring at least this share of its
#: score: chosen on data (leave-one-set-out, with calibrate.BLEND, by benchmarks/quality.py)
DEDUPE_YIELD = 0.5


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
