"""The PostgreSQL store's mirror: each process's in-memory copy of the catalog, kept current.

Every process on a :class:`~toolscout.stores.postgres.PostgresStore` answers catalog reads
(cards, schemas, lexical ranking, and dense search below ``ann_threshold`` distinct texts)
from an in-memory :class:`~toolscout.stores.sqlite.SQLiteStore`. :meth:`PgMirror.generation`
asks PostgreSQL for the committed generation (calls within ``recheck_ms`` share one answer);
when it moved, :meth:`PgMirror.sync` reads, in one repeatable-read transaction, only the
rows of the generations this process has not seen: tombstones of deleted tools, changed
tools, and the vectors the mirror does not have yet (each distinct text once). A mirror
past ``ann_threshold`` keeps no vectors: dense search then runs in PostgreSQL
(``postgres_ann``).

:class:`PgMirror` is a part of :class:`~toolscout.stores.postgres.PostgresStore` (its
base class), kept in a module of its own as ``postgres_ann`` is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence, Set
from contextlib import AbstractContextManager
from typing import Any

from toolscout.cards import CapabilityCard, ToolSpec
from toolscout.stores.base import Hits, IndexedTool, Vector
from toolscout.stores.postgres_ann import _np
from toolscout.stores.sqlite import SQLiteStore

__all__ = ["PgMirror"]


class PgMirror:
    """The mirror methods of the PostgreSQL store (over its connections and its lock)."""

    dim: int
    ann_threshold: int
    recheck_s: float
    _lock: threading.RLock
    _gen_lock: threading.Lock
    #: (monotonic time, generation) of the last answer PostgreSQL gave
    _gen_seen: tuple[float, int]
    _mirror: SQLiteStore
    _seen: int  # generation the mirror reflects
    _ann: bool  # dense search runs in PostgreSQL (the mirror keeps no vectors)
    _n: int  # tools in the catalog at the last sync

    def _conn(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _ask_generation(self) -> int:
        raise NotImplementedError

    def generation(self) -> int:
        """The committed generation in PostgreSQL; the mirror catches up when it moved.

        Asked of the database on every call, except that calls within ``recheck_ms``
        of the last answer share it (one discovery asks several times within a
        millisecond; a change made elsewhere is seen by this process's next request)."""
        now = time.monotonic()
        with self._gen_lock:
            at, gen = self._gen_seen
            if now - at > self.recheck_s:
                gen = self._ask_generation()
                self._gen_seen = (time.monotonic(), gen)
        if gen != self._seen:
            self.sync()
        return gen

    def _wrote(self) -> None:
        """After a committed write here: forget the shared answer, catch the mirror up."""
        with self._gen_lock:
            self._gen_seen = (-1e9, -1)
        self.sync()

    def sync(self) -> int:
        """Bring the in-memory mirror up to the committed generation; returns it."""
        with self._lock, self._conn() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            gen = int(conn.execute("SELECT generation FROM toolscout_state").fetchone()[0])
            if gen == self._seen:
                return gen
            n = int(conn.execute("SELECT count(*) FROM toolscout_tools").fetchone()[0])
            # the mirror's matrix holds each distinct vector once: what decides whether it
            # fits is how many distinct texts there are, not how many tools share them
            distinct = int(
                conn.execute(
                    "SELECT count(DISTINCT text_hash) FROM toolscout_tool_texts"
                ).fetchone()[0]
            )
            ann = distinct >= self.ann_threshold
            since = self._seen
            if ann != self._ann or since < 0 or gen < since:
                self._mirror.close()
                self._mirror = SQLiteStore(":memory:", dim=self.dim)
                since = -1
            self._ann = ann
            self._n = n
            gone = [
                r[0]
                for r in conn.execute(
                    "SELECT b.id FROM toolscout_tombstones b WHERE b.generation > %s"
                    " AND NOT EXISTS (SELECT 1 FROM toolscout_tools t WHERE t.id = b.id)",
                    (since,),
                )
            ]
            if gone and since >= 0:
                self._mirror.delete(gone)
            self._load_changed(conn, since)
            self._seen = gen
            return gen

    def _load_changed(self, conn: Any, since: int) -> None:
        rows = conn.execute(
            "SELECT id, card, parameters, output_schema, fields FROM toolscout_tools"
            " WHERE generation > %s ORDER BY seq",
            (since,),
        ).fetchall()
        step = 5000
        for start in range(0, len(rows), step):
            chunk = rows[start : start + step]
            ids = [r[0] for r in chunk]
            texts: dict[str, dict[str, list[tuple[str, str]]]] = {}
            vectors: dict[str, dict[str, Vector]] = {}
            for tid, kind, th, model in conn.execute(
                "SELECT tool_id, kind, text_hash, model_id"
                " FROM toolscout_tool_texts WHERE tool_id = ANY(%s)",
                (ids,),
            ):
                texts.setdefault(model, {}).setdefault(tid, []).append((kind, th))
            # one embedding model per catalog: the mirror indexes the texts of the first
            model = next(iter(texts), "")
            mine = texts.get(model, {})
            if not self._ann:
                # each distinct vector crosses the wire once: tenants' copies of one
                # integration share their texts, and the mirror keeps what it has
                hashes = sorted({th for owned in mine.values() for _, th in owned})
                have = self._mirror.cached(hashes, model)
                need = [h for h in hashes if h not in have]
                if need:
                    for th, emb in conn.execute(
                        "SELECT text_hash, embedding FROM toolscout_vectors"
                        " WHERE model_id = %s AND text_hash = ANY(%s)",
                        (model, need),
                    ):
                        vectors.setdefault(model, {})[th] = _np(emb)
            tools = [
                IndexedTool(
                    ToolSpec(
                        card=CapabilityCard.from_dict(card), parameters=params, output_schema=out
                    ),
                    fields,
                    mine.get(tid, []) if not self._ann else [],
                )
                for tid, card, params, out, fields in chunk
            ]
            self._mirror.upsert(tools, vectors.get(model, {}), model_id=model)

    # -- read from the mirror ---------------------------------------------------------
    def cards(self) -> list[CapabilityCard]:
        self._fresh()
        return self._mirror.cards()

    def specs(self, ids: Sequence[str]) -> dict[str, ToolSpec]:
        self._fresh()
        return self._mirror.specs(ids)

    def load(self) -> list[ToolSpec]:
        cards = self.cards()
        specs = self.specs([c.id for c in cards])
        return [specs[c.id] for c in cards if c.id in specs]

    def _fresh(self) -> None:
        if self._seen < 0:
            self.sync()

    def lexical(
        self,
        terms: Sequence[str],
        allowed: Set[str],
        limit: int,
        *,
        weights: Mapping[str, float],
    ) -> Hits:
        self._fresh()
        return self._mirror.lexical(terms, allowed, limit, weights=weights)

    def document_frequency(self) -> tuple[Mapping[str, int], int]:
        self._fresh()
        return self._mirror.document_frequency()
