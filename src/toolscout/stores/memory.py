"""The in-memory reference store: every protocol of :mod:`toolscout.stores.base` in plain Python.

It keeps nothing on disk, serves tests and short-lived catalogs (an MCP gateway
over upstreams it lists at start-up), and is the reference the store contract
suite holds every other backend to. Lexical search is BM25 with per-field
weights computed as SQLite FTS5 does (weighted term frequency, unweighted
document length); dense search is exact cosine.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

import numpy as np

from toolscout.cards import CapabilityCard, ToolSpec
from toolscout.stores.base import (
    LEXICAL_FIELDS,
    Hits,
    IndexedTool,
    UpsertStats,
    Vector,
    plan_upsert,
    require_vectors,
    uncached_texts,
)

#: BM25 parameters (FTS5's defaults)
K1 = 1.2
B = 0.75


@dataclass(frozen=True, slots=True)
class _Doc:
    spec: ToolSpec
    fields: Mapping[str, tuple[str, ...]]
    texts: tuple[tuple[str, str], ...]
    chash: str
    #: every field's terms counted, every term of any field, and the document's length
    #: (all fields' terms): what each lexical search would otherwise count again for
    #: every document
    counts: Mapping[str, Mapping[str, int]]
    terms: frozenset[str]
    length: int

    @classmethod
    def of(
        cls, spec: ToolSpec, fields: Mapping[str, tuple[str, ...]],
        texts: tuple[tuple[str, str], ...], chash: str,
    ) -> _Doc:  # fmt: skip
        counts = {f: Counter(terms) for f, terms in fields.items()}
        every = frozenset(t for terms in fields.values() for t in terms)
        return cls(spec, fields, texts, chash, counts, every, sum(len(v) for v in fields.values()))


class MemoryStore:
    """A :class:`~toolscout.stores.base.Store` held in this process's memory."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._docs: dict[str, _Doc] = {}  # insertion order is the catalog order
        self._vectors: dict[tuple[str, str], Vector] = {}
        self._meta: dict[str, str] = {}
        self._learned: dict[tuple[str, str], int] = {}
        self._generation = 0
        self._df: dict[str, int] | None = None
        #: each (kinds, model) scan's rows, until the next change
        self._scans: dict[tuple[frozenset[str], str], list[tuple[str, Vector]]] = {}

    def close(self) -> None:
        """Nothing to release; the store stays usable."""

    # -- CardStore -------------------------------------------------------------------
    def upsert(
        self,
        tools: Sequence[IndexedTool],
        vectors: Mapping[str, Vector],
        *,
        model_id: str,
        replace_all: bool = False,
        unchanged: Sequence[str] = (),
    ) -> UpsertStats:
        with self._lock:
            needed = uncached_texts(tools, vectors)
            require_vectors({h for h in needed if (h, model_id) not in self._vectors}, model_id)
            docs = dict(self._docs)
            plan = plan_upsert(
                tools,
                {t: d.chash for t, d in docs.items()},
                replace_all=replace_all,
                unchanged_ids=unchanged,
            )
            added, updated, n_unchanged, removed = (
                plan.added, plan.updated, plan.unchanged, len(plan.gone)
            )  # fmt: skip
            for tool, chash in plan.changed:
                docs[tool.spec.id] = _Doc.of(
                    tool.spec,
                    {f: tuple(tool.fields.get(f, "").split()) for f in LEXICAL_FIELDS},
                    tuple(tool.texts),
                    chash,
                )
            for tid in plan.gone:
                del docs[tid]
            # commit: nothing above touched the live state
            for h, vec in vectors.items():
                self._vectors[(h, model_id)] = np.asarray(vec, dtype=np.float32)
            self._docs = docs
            if added or updated or removed or vectors:
                self._changed()
            return UpsertStats(added, updated, n_unchanged, removed, len(vectors))

    def content_hashes(self, ids: Sequence[str]) -> dict[str, str]:
        docs = self._docs
        return {t: docs[t].chash for t in ids if t in docs}

    def _changed(self) -> None:
        self._generation += 1
        self._df = None
        self._scans = {}

    def delete(self, ids: Sequence[str]) -> int:
        with self._lock:
            gone = [t for t in dict.fromkeys(ids) if t in self._docs]
            for tid in gone:
                del self._docs[tid]
            if gone:
                self._changed()
            return len(gone)

    def cards(self) -> list[CapabilityCard]:
        with self._lock:
            return [d.spec.card for d in self._docs.values()]

    def specs(self, ids: Sequence[str]) -> dict[str, ToolSpec]:
        with self._lock:
            return {t: self._docs[t].spec for t in ids if t in self._docs}

    def generation(self) -> int:
        return self._generation

    # -- SearchIndex -----------------------------------------------------------------
    def document_frequency(self) -> tuple[dict[str, int], int]:
        with self._lock:
            if self._df is None:
                df: dict[str, int] = {}
                for doc in self._docs.values():
                    for term in doc.terms:
                        df[term] = df.get(term, 0) + 1
                self._df = df
            return self._df, len(self._docs)

    def lexical(
        self,
        terms: Sequence[str],
        allowed: Set[str],
        limit: int,
        *,
        weights: Mapping[str, float],
    ) -> Hits:
        uniq = list(dict.fromkeys(t for t in terms if t))
        used = [f for f in LEXICAL_FIELDS if weights.get(f, 0.0) > 0]
        if not uniq or not used or not allowed:
            return Hits()
        with self._lock:
            docs = list(self._docs.values())
        n = len(docs)
        avgdl = (sum(d.length for d in docs) / n) if n else 1.0
        # document frequency over the fields searched, as FTS5's column filter counts it;
        # and which of the query's terms each document has there (in the query's order)
        df = {t: 0 for t in uniq}
        found: list[list[str]] = []
        some_fields = len(used) < len(LEXICAL_FIELDS)
        for doc in docs:
            present = [t for t in uniq if t in doc.terms]
            if present and some_fields:  # only where the searched fields have it
                counts = [doc.counts[f] for f in used]
                present = [t for t in present if any(t in c for c in counts)]
            for t in present:
                df[t] += 1
            found.append(present)
        idf = {t: max(math.log((n - df[t] + 0.5) / (df[t] + 0.5)), 1e-6) for t in uniq}
        weight = [(f, weights.get(f, 0.0)) for f in used]
        scored: list[tuple[float, str]] = []
        for doc, present in zip(docs, found, strict=True):
            if not present or doc.spec.id not in allowed:
                continue  # a term it lacks adds nothing to its score (tf 0)
            norm = K1 * (1 - B + B * doc.length / (avgdl or 1.0))
            score = 0.0
            for t in present:
                tf = sum(w * doc.counts[f].get(t, 0) for f, w in weight)
                if tf > 0:
                    score += idf[t] * tf * (K1 + 1) / (tf + norm)
            if score > 0:
                scored.append((score, doc.spec.id))
        scored.sort(key=lambda s: (-s[0], s[1]))
        top = scored[:limit]
        return Hits([t for _, t in top], [s for s, _ in top])

    def _rows(self, kinds: Set[str], model_id: str) -> list[tuple[str, Vector]]:
        key = (frozenset(kinds), model_id)
        with self._lock:
            rows = self._scans.get(key)
            if rows is None:
                rows = self._scans[key] = [
                    (doc.spec.id, vec)
                    for doc in self._docs.values()
                    for kind, h in doc.texts
                    if kind in kinds and (vec := self._vectors.get((h, model_id))) is not None
                ]
            return rows

    def dense(
        self,
        vector: Vector,
        allowed: Set[str],
        limit: int,
        *,
        kinds: Set[str],
        also: Sequence[str] = (),
        model_id: str = "",
    ) -> Hits:
        best: dict[str, float] = {}
        for tid, vec in self._rows(kinds, model_id):
            if tid in allowed:
                sim = float(vec @ vector)
                if sim > best.get(tid, -math.inf):
                    best[tid] = sim
        ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))
        hits = Hits([t for t, _ in ranked[:limit]], [s for _, s in ranked[:limit]])
        seen = set(hits.ids)
        for tid in also:
            if tid not in seen and tid in best:
                hits.ids.append(tid)
                hits.scores.append(best[tid])
                seen.add(tid)
        return hits

    def neighbours(
        self, vector: Vector, allowed: Set[str], *, kind: str, k: int, model_id: str = ""
    ) -> list[tuple[str, float]]:
        sims = [(tid, float(v @ vector)) for tid, v in self._rows({kind}, model_id)]
        sims = [s for s in sims if s[0] in allowed]
        sims.sort(key=lambda s: -s[1])
        return sims[:k]

    def card_vectors(self, ids: Sequence[str], model_id: str) -> dict[str, Vector]:
        out: dict[str, Vector] = {}
        with self._lock:
            for tid in ids:
                doc = self._docs.get(tid)
                if doc is None:
                    continue
                for kind, h in doc.texts:
                    vec = self._vectors.get((h, model_id))
                    if kind == "card" and vec is not None:
                        out[tid] = vec
                        break
        return out

    # -- VectorCache -----------------------------------------------------------------
    def cached(self, hashes: Sequence[str], model_id: str) -> set[str]:
        with self._lock:
            return {h for h in hashes if (h, model_id) in self._vectors}

    def vectors_of(self, hashes: Sequence[str], model_id: str) -> dict[str, Vector]:
        with self._lock:
            return {h: v for h in hashes if (v := self._vectors.get((h, model_id))) is not None}

    # -- MetaStore -------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        with self._lock:
            return self._meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._meta[key] = str(value)
            self._changed()

    # -- LearnedStore ----------------------------------------------------------------
    def learned_add(self, pairs: Sequence[tuple[str, str, int]]) -> None:
        with self._lock:
            for tool_id, phrase, uses in pairs:
                self._learned[(tool_id, phrase)] = self._learned.get((tool_id, phrase), 0) + uses

    def learned(self, limit_per_tool: int) -> dict[str, list[str]]:
        with self._lock:
            rows = sorted(self._learned.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1]))
        out: dict[str, list[str]] = {}
        for (tool_id, phrase), _ in rows:
            bucket = out.setdefault(tool_id, [])
            if len(bucket) < limit_per_tool:
                bucket.append(phrase)
        return out

    def learned_clear(self) -> None:
        with self._lock:
            self._learned.clear()
