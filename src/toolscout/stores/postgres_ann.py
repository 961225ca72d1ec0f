"""The PostgreSQL store's dense search once a catalog outgrows each replica's matrix.

Below ``ann_threshold`` distinct embedded texts every replica searches its in-memory
mirror (exact cosine); above it, dense search and the learned-alias neighbours run in
PostgreSQL: exact cosine over the allowed tools' rows when a caller may use at most
``exact_below`` tools, else pgvector's HNSW index searched within the allowed ids
(pgvector >= 0.8's iterative scan; over-fetched and filtered before 0.8).

:class:`PgVectorSearch` is a part of :class:`~toolscout.stores.postgres.PostgresStore`
(its base class), kept in a module of its own as ``sqlite_lexical`` is for SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from toolscout.stores.base import KIND_CARD, Hits, Vector
from toolscout.stores.sqlite import SQLiteStore

__all__ = ["PgVectorSearch"]


class PgVectorSearch:
    """The dense-search methods of the PostgreSQL store (over its connections, its mirror
    and the catalog size its last sync saw)."""

    ef_search: int
    exact_below: int
    _ann: bool
    _n: int
    _iterative: bool
    _mirror: SQLiteStore

    def _conn(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _fresh(self) -> None:
        raise NotImplementedError

    def _ann_rows(
        self, vector: Vector, kinds: Set[str], model_id: str, limit: int, allowed: Set[str]
    ) -> list[tuple[str, str, float]]:
        """Nearest (tool id, kind, cosine) rows by the HNSW index, for ``allowed`` tools.

        With pgvector >= 0.8 and a caller allowed a minority of the catalog, the allowed
        ids are part of the query and an iterative scan keeps walking the graph until
        enough of them were found (the order is relaxed: callers re-sort). Otherwise the
        index is over-fetched by the inverse of the allowed share and filtered here."""
        vec = np.asarray(vector, dtype=np.float32)
        share = max(len(allowed), 1) / max(self._n, 1)
        narrow = self._iterative and share < 0.5
        fetch = 4 * limit + 20 if narrow else self._fetch_size(limit, allowed)
        sql = (
            "SELECT tool_id, kind, 1 - (embedding <=> %s) FROM toolscout_tool_texts"
            " WHERE model_id = %s AND kind = ANY(%s)"
        )
        params: list[Any] = [vec, model_id, sorted(kinds)]
        if narrow:
            sql += " AND tool_id = ANY(%s)"
            params.append(sorted(allowed))
        sql += " ORDER BY embedding <=> %s LIMIT %s"
        params += [vec, fetch]
        with self._conn() as conn, conn.transaction():
            conn.execute(f"SET LOCAL hnsw.ef_search = {max(self.ef_search, min(fetch, 1000))}")
            if narrow:
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            rows = conn.execute(sql, params).fetchall()
        out = [(r[0], r[1], float(r[2])) for r in rows if r[0] in allowed]
        out.sort(key=lambda r: -r[2])
        return out

    def _fetch_size(self, limit: int, allowed: Set[str]) -> int:
        share = max(len(allowed), 1) / max(self._n, 1)
        return int(min(max(limit / max(share, 1e-3) * 2, 4 * limit, 100), 2000))

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
        self._fresh()
        if not self._ann:
            return self._mirror.dense(
                vector, allowed, limit, kinds=kinds, also=also, model_id=model_id
            )
        if len(allowed) <= self.exact_below:
            # few allowed tools: exact cosine over their rows beats filtering an ANN result
            exact = self._exact(vector, sorted(allowed), kinds, model_id)
            ranked = sorted(exact.items(), key=lambda kv: -kv[1])[:limit]
            hits = Hits([t for t, _ in ranked], [s for _, s in ranked])
            for tid in dict.fromkeys(also):
                if tid in exact and tid not in hits.ids:
                    hits.ids.append(tid)
                    hits.scores.append(exact[tid])
            return hits
        best: dict[str, float] = {}
        for tid, _kind, sim in self._ann_rows(vector, kinds, model_id, limit, allowed):
            if sim > best.get(tid, -2.0):
                best[tid] = sim
        ranked = sorted(best.items(), key=lambda kv: -kv[1])[:limit]
        hits = Hits([t for t, _ in ranked], [s for _, s in ranked])
        shown = set(hits.ids)
        extra = [t for t in dict.fromkeys(also) if t not in shown and t in allowed]
        if extra:
            exact = {t: best[t] for t in extra if t in best}
            rest = [t for t in extra if t not in best]
            if rest:
                exact.update(self._exact(vector, rest, kinds, model_id))
            for tid in extra:
                if tid in exact:
                    hits.ids.append(tid)
                    hits.scores.append(exact[tid])
        return hits

    def _exact(
        self, vector: Vector, ids: Sequence[str], kinds: Set[str], model_id: str
    ) -> dict[str, float]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT tool_id, max(1 - (embedding <=> %s)) FROM toolscout_tool_texts"
                " WHERE model_id = %s AND kind = ANY(%s) AND tool_id = ANY(%s) GROUP BY tool_id",
                (np.asarray(vector, dtype=np.float32), model_id, sorted(kinds), list(ids)),
            ).fetchall()
        return {r[0]: float(r[1]) for r in rows}

    def neighbours(
        self, vector: Vector, allowed: Set[str], *, kind: str, k: int, model_id: str = ""
    ) -> list[tuple[str, float]]:
        self._fresh()
        if not self._ann:
            return self._mirror.neighbours(vector, allowed, kind=kind, k=k, model_id=model_id)
        rows = self._ann_rows(vector, {kind}, model_id, k, allowed)
        return [(tid, sim) for tid, _kind, sim in rows][:k]

    def card_vectors(self, ids: Sequence[str], model_id: str) -> dict[str, Vector]:
        self._fresh()
        if not self._ann:
            return self._mirror.card_vectors(ids, model_id)
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT tool_id, embedding FROM toolscout_tool_texts"
                " WHERE model_id = %s AND kind = %s AND tool_id = ANY(%s)",
                (model_id, KIND_CARD, list(ids)),
            ).fetchall()
        return {r[0]: _np(r[1]) for r in rows}


def _np(value: Any) -> Vector:
    """A vector column as float32 (pgvector returns its own ``Vector`` type)."""
    raw = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(raw, dtype=np.float32)
