"""The PostgreSQL + pgvector store: the shared source of truth for several replicas.

PostgreSQL holds the catalog (cards, schemas, lexical fields, the vectors of every
embedded text, the policy and other meta values, learned aliases) and a generation
counter that every write transaction bumps. Each process keeps a *mirror* of it —
an in-memory :class:`~toolscout.stores.sqlite.SQLiteStore` (FTS5 BM25 and exact
dense search) — and brings it up to date from the rows whose generation is newer
than the one it saw, so a replica re-reads only what changed and embeds nothing
(``postgres_mirror``).
Lexical ranking is never done in SQL (``ts_rank`` over OR queries is far too slow
at 100k tools). The mirror's dense matrix holds each distinct embedded text once
(tenants' copies of one integration share theirs); above ``ann_threshold`` distinct
texts, dense search and the learned-alias neighbours move to PostgreSQL instead:
exact cosine over the allowed tools' rows when a caller may use at most
``exact_below`` tools, the HNSW index searched within the allowed ids when it may use
more (pgvector >= 0.8's iterative scan; over-fetched and filtered before 0.8:
``postgres_ann``).

What a generation derives (token counts, the multilingual word list) is kept as blobs
in ``toolscout_derived`` for every replica's next process (``postgres_derived``).

Writers announce a new generation with ``NOTIFY toolscout_catalog``; readers do not
rely on it: :meth:`PostgresStore.generation` asks the database every time, so a
tool deleted or re-scoped through one replica is gone for every replica's next call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any

import numpy as np

from toolscout.errors import MissingExtraError, StoreError
from toolscout.stores.base import (
    IndexedTool,
    UpsertStats,
    Vector,
    plan_upsert,
    require_vectors,
    uncached_texts,
)
from toolscout.stores.dsn import one_line
from toolscout.stores.postgres_ann import PgVectorSearch, _np
from toolscout.stores.postgres_derived import PgDerivedState
from toolscout.stores.postgres_mirror import PgMirror
from toolscout.stores.sqlite import SQLiteStore

_log = logging.getLogger(__name__)


def conn_lost(exc: BaseException) -> bool:
    """Whether a psycopg error is about the connection (the server gone, the socket cut)
    rather than a statement: ``OperationalError`` and its kinds."""
    import psycopg

    return isinstance(exc, psycopg.OperationalError)


#: NOTIFY channel a writer signals on after each committed write
CHANNEL = "toolscout_catalog"
#: distinct embedded texts above which dense search uses the HNSW index in PostgreSQL
#: (below it each replica's in-memory matrix holds them: 100k x 384 float32 is 150 MiB)
DEFAULT_ANN_THRESHOLD = 100_000

_MIGRATIONS_LOCK = 72_011_011  # pg_advisory_xact_lock key: one migrator at a time
#: text hashes per query when stored vectors are looked up
_VECTOR_CHUNK = 20_000


def _migrations() -> list[tuple[int, str]]:
    """(version, SQL) of every bundled migration, in order."""
    root = resources.files("toolscout.stores").joinpath("migrations", "postgres")
    out: list[tuple[int, str]] = []
    for entry in root.iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:3].isdigit():
            out.append((int(name[:3]), entry.read_text(encoding="utf-8")))
    return sorted(out)


def _version(text: str) -> tuple[int, ...]:
    """``"0.8.0"`` -> ``(0, 8, 0)``; unparsable parts end the tuple."""
    out: list[int] = []
    for part in text.split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


class PostgresStore(PgMirror, PgVectorSearch, PgDerivedState):
    """A :class:`~toolscout.stores.base.Store` on PostgreSQL + pgvector, mirrored in memory."""

    def __init__(
        self,
        dsn: str,
        *,
        dim: int = 384,
        ann_threshold: int = DEFAULT_ANN_THRESHOLD,
        ef_search: int = 100,
        exact_below: int = 3000,
        recheck_ms: float = 1.0,
        pool_size: int = 4,
    ) -> None:
        try:
            import psycopg
            from pgvector.psycopg import register_vector
            from psycopg_pool import ConnectionPool
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise MissingExtraError(exc.name or "psycopg", "postgres") from None
        self._psycopg = psycopg
        self.dsn = dsn
        self.dim = dim
        self.ann_threshold = ann_threshold
        self.ef_search = ef_search
        self.exact_below = exact_below
        self.recheck_s = recheck_ms / 1000.0
        self._gen_lock = threading.Lock()
        self._gen_seen: tuple[float, int] = (-1e9, -1)
        self._gen_conn: Any = None
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                self._migrate(conn)
                row = conn.execute(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                ).fetchone()
            # pgvector 0.8 can keep walking the HNSW graph until enough rows pass a filter
            self._iterative = _version(str(row[0]) if row else "") >= (0, 8)
            self._pool = ConnectionPool(
                dsn,
                min_size=1,
                max_size=pool_size,
                configure=register_vector,
                open=True,
                timeout=10.0,
            )
        except psycopg.Error as exc:
            raise StoreError(f"cannot open the PostgreSQL store: {one_line(exc)}") from None
        self._lock = threading.RLock()
        self._mirror = SQLiteStore(":memory:", dim=dim)
        self._seen = -1  # generation the mirror reflects
        self._ann = False
        self._n = 0
        self.sync()

    # -- schema -------------------------------------------------------------------
    def _migrate(self, conn: Any) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATIONS_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS toolscout_migrations"
                " (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM toolscout_migrations")}
            known = _migrations()
            if done and max(done) > known[-1][0]:
                raise StoreError(
                    f"the database has schema version {max(done)}; this toolscout knows"
                    f" {known[-1][0]} (upgrade toolscout)"
                )
            for version, sql in known:
                if version not in done:
                    conn.execute(sql)
                    conn.execute(
                        "INSERT INTO toolscout_migrations(version) VALUES (%s)", (version,)
                    )

    def schema_version(self) -> int:
        with self._conn() as conn:
            row = conn.execute("SELECT max(version) FROM toolscout_migrations").fetchone()
        return int(row[0] or 0)

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        try:
            with self._pool.connection() as conn:
                yield conn
        except self._psycopg.Error as exc:
            if conn_lost(exc):
                self._drop_dead_connections()
            raise StoreError(f"PostgreSQL: {one_line(exc)}") from None

    def _drop_dead_connections(self) -> None:
        """Check every idle pooled connection now and replace the dead ones.

        A database restart kills every idle connection, and the pool finds out only when
        one is drawn: each would then fail its next request, however long afterwards. The
        pool's own check on every draw costs a round trip and, with several dead, seconds
        of back-off; this runs once, when a connection is seen lost."""
        try:
            self._pool.check()
        except Exception as exc:  # the database still down: the pool reconnects later
            _log.debug("pool check after a lost connection: %s", one_line(exc))

    def close(self) -> None:
        with self._lock:
            if self._gen_conn is not None:
                self._gen_conn.close()
            self._pool.close()
            self._mirror.close()

    def _ask_generation(self) -> int:
        """One prepared query on a connection kept for it (reconnects once if it broke)."""
        psycopg = self._psycopg
        for attempt in (1, 2):
            try:
                if self._gen_conn is None or self._gen_conn.closed:
                    self._gen_conn = psycopg.connect(self.dsn, autocommit=True)
                row = self._gen_conn.execute(
                    "SELECT generation FROM toolscout_state", prepare=True
                ).fetchone()
                return int(row[0])
            except psycopg.Error as exc:
                self._gen_conn = None
                if attempt == 1 and conn_lost(exc):
                    # the database went away since the last request: the pooled
                    # connections are dead too, so they go before this request draws one
                    self._drop_dead_connections()
                if attempt == 2:
                    raise StoreError(f"PostgreSQL: {one_line(exc)}") from None
        raise AssertionError("unreachable")

    # -- writing ------------------------------------------------------------------
    def upsert(
        self,
        tools: Sequence[IndexedTool],
        vectors: Mapping[str, Vector],
        *,
        model_id: str,
        replace_all: bool = False,
        unchanged: Sequence[str] = (),
    ) -> UpsertStats:
        counts = [0, 0, 0, 0]  # added, updated, unchanged, removed
        try:
            self._upsert(tools, vectors, model_id, replace_all, counts, unchanged)
        except _NothingChanged:
            return UpsertStats(0, 0, counts[2], 0, 0)
        self._wrote()
        added, updated, n_unchanged, removed = counts
        return UpsertStats(added, updated, n_unchanged, removed, len(vectors))

    def _upsert(
        self,
        tools: Sequence[IndexedTool],
        vectors: Mapping[str, Vector],
        model_id: str,
        replace_all: bool,
        counts: list[int],
        unchanged_ids: Sequence[str] = (),
    ) -> None:
        added = updated = unchanged = removed = 0
        with self._conn() as conn, conn.transaction():
            gen = self._bump(conn)
            existing = dict(conn.execute("SELECT id, content_hash FROM toolscout_tools"))
            needed = uncached_texts(tools, vectors)
            require_vectors(set(needed) - self._cached(conn, needed, model_id), model_id)
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO toolscout_vectors(text_hash, model_id, embedding)"
                    " VALUES (%s, %s, %s) ON CONFLICT (text_hash, model_id)"
                    " DO UPDATE SET embedding = excluded.embedding",
                    [(h, model_id, np.asarray(v, dtype=np.float32)) for h, v in vectors.items()],
                )
            plan = plan_upsert(
                tools, existing, replace_all=replace_all, unchanged_ids=unchanged_ids
            )
            added, updated, unchanged = plan.added, plan.updated, plan.unchanged
            self._write(conn, list(plan.changed), gen, model_id)
            if plan.gone:
                removed = self._delete(conn, list(plan.gone), gen)
            counts[:] = [added, updated, unchanged, removed]
            if not (added or updated or removed or vectors):
                raise _NothingChanged

    def _bump(self, conn: Any) -> int:
        row = conn.execute(
            "UPDATE toolscout_state SET generation = generation + 1 RETURNING generation"
        ).fetchone()
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(row[0])))
        return int(row[0])

    def _write(
        self, conn: Any, changed: Sequence[tuple[IndexedTool, str]], gen: int, model_id: str
    ) -> None:
        if not changed:
            return
        from psycopg.types.json import Jsonb

        ids = [t.spec.id for t, _ in changed]
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO toolscout_tools"
                " (id, card, parameters, output_schema, fields, content_hash, generation)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET"
                " card = excluded.card, parameters = excluded.parameters,"
                " output_schema = excluded.output_schema, fields = excluded.fields,"
                " content_hash = excluded.content_hash, generation = excluded.generation,"
                " updated_at = now()",
                [
                    (
                        t.spec.id,
                        Jsonb(t.spec.card.to_dict()),
                        Jsonb(dict(t.spec.parameters)),
                        Jsonb(dict(t.spec.output_schema))
                        if t.spec.output_schema is not None
                        else None,
                        Jsonb(dict(t.fields)),
                        chash,
                        gen,
                    )
                    for t, chash in changed
                ],
            )
            first_load = (
                sum(len(t.texts) for t, _ in changed) >= _BUILD_AFTER
                and not (
                    cur.execute("SELECT EXISTS (SELECT 1 FROM toolscout_tool_texts)").fetchone()[0]
                )
            )
            cur.execute("DELETE FROM toolscout_tool_texts WHERE tool_id = ANY(%s)", (ids,))
            with _ann_built_after(cur, first_load):
                cur.execute(
                    "INSERT INTO toolscout_tool_texts"
                    " (tool_id, kind, text_hash, model_id, embedding)"
                    " SELECT x.tool_id, x.kind, x.text_hash, v.model_id, v.embedding"
                    " FROM unnest(%s::text[], %s::text[], %s::text[])"
                    " AS x(tool_id, kind, text_hash)"
                    " JOIN toolscout_vectors v ON v.text_hash = x.text_hash AND v.model_id = %s"
                    " ON CONFLICT DO NOTHING",
                    (
                        [t.spec.id for t, _ in changed for _k, _h in t.texts],
                        [k for t, _ in changed for k, _h in t.texts],
                        [h for t, _ in changed for _k, h in t.texts],
                        model_id,
                    ),
                )
            cur.execute("DELETE FROM toolscout_tombstones WHERE id = ANY(%s)", (ids,))

    def _delete(self, conn: Any, ids: Sequence[str], gen: int) -> int:
        if not ids:
            return 0
        gone = [
            r[0]
            for r in conn.execute(
                "DELETE FROM toolscout_tools WHERE id = ANY(%s) RETURNING id", (list(ids),)
            )
        ]
        if gone:
            conn.execute(
                "INSERT INTO toolscout_tombstones(id, generation)"
                " SELECT unnest(%s::text[]), %s"
                " ON CONFLICT (id) DO UPDATE SET generation = excluded.generation",
                (gone, gen),
            )
        return len(gone)

    def content_hashes(self, ids: Sequence[str]) -> dict[str, str]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT id, content_hash FROM toolscout_tools WHERE id = ANY(%s)", (list(ids),)
            ).fetchall()
        return {str(tid): str(h) for tid, h in rows}

    def delete(self, ids: Sequence[str]) -> int:
        try:
            with self._conn() as conn, conn.transaction():
                gen = self._bump(conn)
                n = self._delete(conn, list(dict.fromkeys(ids)), gen)
                if not n:
                    raise _NothingChanged
        except _NothingChanged:
            return 0
        self._wrote()
        return n

    # -- vectors ---------------------------------------------------------------------
    def _cached(self, conn: Any, hashes: Sequence[str], model_id: str) -> set[str]:
        return {r[0] for r in _vector_rows(conn, "text_hash", hashes, model_id)}

    def cached(self, hashes: Sequence[str], model_id: str) -> set[str]:
        with self._conn() as conn:
            return self._cached(conn, hashes, model_id)

    def vectors_of(self, hashes: Sequence[str], model_id: str) -> dict[str, Vector]:
        with self._conn() as conn:
            return {
                th: _np(emb)
                for th, emb in _vector_rows(conn, "text_hash, embedding", hashes, model_id)
            }

    # -- meta and learned aliases ----------------------------------------------------
    def meta(self, key: str) -> str | None:
        with self._conn() as conn:
            row = conn.execute("SELECT value FROM toolscout_meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._conn() as conn, conn.transaction():
            self._bump(conn)
            conn.execute(
                "INSERT INTO toolscout_meta(key, value) VALUES (%s, %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, str(value)),
            )
        self._wrote()

    def learned_add(self, pairs: Sequence[tuple[str, str, int]]) -> None:
        if not pairs:
            return
        with self._conn() as conn, conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO toolscout_learned_aliases(tool_id, phrase, uses) VALUES (%s,%s,%s)"
                " ON CONFLICT (tool_id, phrase)"
                " DO UPDATE SET uses = toolscout_learned_aliases.uses + excluded.uses",
                list(pairs),
            )

    def learned(self, limit_per_tool: int) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT tool_id, phrase FROM toolscout_learned_aliases"
                " ORDER BY tool_id, uses DESC, phrase"
            ).fetchall()
        for tool_id, phrase in rows:
            bucket = out.setdefault(tool_id, [])
            if len(bucket) < limit_per_tool:
                bucket.append(phrase)
        return out

    def learned_clear(self) -> None:
        with self._conn() as conn:
            conn.execute("DELETE FROM toolscout_learned_aliases")


#: texts a write must add to an empty ``toolscout_tool_texts`` for its HNSW index to be
#: built after the rows instead of kept up to date row by row (``_ann_built_after``)
_BUILD_AFTER = 1000


@contextmanager
def _ann_built_after(cur: Any, first_load: bool) -> Iterator[None]:
    """Around the statement that fills ``toolscout_tool_texts``: when it is the first load
    (the table held no row before this write, which adds at least ``_BUILD_AFTER``), drop
    the table's HNSW indexes before it and create them again, from their own definitions,
    after it.

    Keeping an HNSW graph up to date costs a graph search per inserted row: 4,000 rows
    of 384 dimensions took ~5.7 s of PostgreSQL's CPU that way, and ~1.4 s built after
    the rows. It is all in the write's transaction (its generation is bumped first, so
    no other writer runs meanwhile): a reader sees the old, empty table or the new one
    with its index. The dropped index's lock makes a reader of the table (a replica's
    first sync) wait for the load's commit instead of reading the empty catalog; a
    catalog that already holds texts keeps its index and every write into it."""
    if not first_load:
        yield
        return
    defs = cur.execute(
        "SELECT c.oid::regclass::text, pg_get_indexdef(c.oid)"
        " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " JOIN pg_am a ON a.oid = c.relam"
        " WHERE i.indrelid = 'toolscout_tool_texts'::regclass AND a.amname = 'hnsw'"
    ).fetchall()
    for name, _ in defs:
        cur.execute(f"DROP INDEX {name}")
    yield
    for _, definition in defs:
        cur.execute(definition)


class _NothingChanged(Exception):
    """Raised inside a write transaction to roll back an empty generation bump."""


def _vector_rows(
    conn: Any, columns: str, hashes: Sequence[str], model_id: str
) -> Iterator[tuple[Any, ...]]:
    """``columns`` of the stored vectors of ``hashes`` for ``model_id``, 20,000 hashes a query."""
    for start in range(0, len(hashes), _VECTOR_CHUNK):
        chunk = list(hashes[start : start + _VECTOR_CHUNK])
        yield from conn.execute(
            f"SELECT {columns} FROM toolscout_vectors WHERE model_id = %s AND text_hash = ANY(%s)",
            (model_id, chunk),
        )
