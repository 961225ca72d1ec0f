"""The embedded default store: one SQLite file.

Cards and schemas live in ``tools``; the lexical index is an FTS5 table whose
rowid is the tool's (searched by ``sqlite_lexical``); vectors are cached by content
hash in ``vectors`` and owned by tools through ``tool_texts``. Dense search is exact brute-force
cosine over an in-memory float32 matrix built from those rows (``sqlite_dense``); what a
generation derives is kept beside them (``sqlite_derived``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Container, Mapping, Sequence, Set
from pathlib import Path
from typing import Any

import numpy as np

from toolscout.cards import CapabilityCard, ToolSpec
from toolscout.errors import StoreError
from toolscout.stores import sqlite_dense
from toolscout.stores.base import (
    LEXICAL_FIELDS,
    Hits,
    IndexedTool,
    LearnedAliases,
    UpsertStats,
    Vector,
    plan_upsert,
    require_vectors,
    uncached_texts,
)
from toolscout.stores.sqlite_dense import _DenseIndex, _neighbours
from toolscout.stores.sqlite_derived import DerivedState, _chunks
from toolscout.stores.sqlite_lexical import (
    SCOPE_PREFIX,
    SHARED_SCOPE,
    LexicalIndex,
    _Scopes,
    _Vocabulary,
    scope_value,
)

FIELD_NAMES = LEXICAL_FIELDS

_SCHEMA_V1 = f"""
CREATE TABLE IF NOT EXISTS tools (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    card TEXT NOT NULL,
    parameters TEXT NOT NULL,
    output_schema TEXT,
    content_hash TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS tool_fts USING fts5(
    {", ".join(FIELD_NAMES)}, tokenize = 'unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE IF NOT EXISTS tool_vocab USING fts5vocab(tool_fts, 'row');
CREATE TABLE IF NOT EXISTS vectors (
    text_hash TEXT NOT NULL,
    model_id TEXT NOT NULL,
    vec BLOB NOT NULL,
    PRIMARY KEY (text_hash, model_id)
);
CREATE TABLE IF NOT EXISTS tool_texts (
    tool_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    PRIMARY KEY (tool_id, kind, text_hash)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_SCHEMA_V2 = """
CREATE TABLE IF NOT EXISTS learned_aliases (
    tool_id TEXT NOT NULL,
    phrase TEXT NOT NULL,
    uses INTEGER NOT NULL,
    PRIMARY KEY (tool_id, phrase)
);
INSERT OR IGNORE INTO meta(key, value) VALUES ('generation', '0');
"""

_SCHEMA_V3 = f"""
CREATE VIRTUAL TABLE tool_fts_v3 USING fts5(
    {", ".join(FIELD_NAMES)}, scope, tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO tool_fts_v3(rowid, {", ".join(FIELD_NAMES)}, scope)
    SELECT f.rowid, {", ".join("f." + f for f in FIELD_NAMES)}, coalesce(
        (SELECT group_concat('{SCOPE_PREFIX}' || lower(hex(j.value)), ' ')
         FROM json_each(t.card, '$.tenants') AS j),
        '{SHARED_SCOPE}')
    FROM tool_fts AS f JOIN tools AS t ON t.rid = f.rowid;
DROP TABLE tool_vocab;
DROP TABLE tool_fts;
ALTER TABLE tool_fts_v3 RENAME TO tool_fts;
CREATE VIRTUAL TABLE tool_vocab USING fts5vocab(tool_fts, 'row');
"""

#: numbered schema migrations; ``PRAGMA user_version`` is the last one applied
MIGRATIONS: tuple[str, ...] = (_SCHEMA_V1, _SCHEMA_V2, _SCHEMA_V3)


def _card_from_json(raw: str) -> CapabilityCard:
    return CapabilityCard.from_dict(json.loads(raw))


class SQLiteStore(LexicalIndex, DerivedState):
    """A :class:`~toolscout.stores.base.Store` in one SQLite file (WAL, one writer)."""

    def __init__(self, path: str | Path, *, dim: int = 384, busy_timeout_s: float = 5.0) -> None:
        self.path = Path(path)
        self.dim = dim
        self._lock = threading.RLock()
        try:
            if str(path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                str(path), check_same_thread=False, isolation_level=None, timeout=busy_timeout_s
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the store at {path}: {exc}") from exc
        self._dense: _DenseIndex | None = None
        self._ids_by_rid: dict[int, str] | None = None
        self._id_rows: tuple[list[int], list[str]] | None = None  # (rids, ids) in rid order
        self._scopes: _Scopes | None = None
        self._scopes_read = threading.Lock()  # held by prepare_lexical while it reads
        self._dense_model: str | None = None
        self._df: _Vocabulary | None = None
        self._n_docs = 0
        self._seen_generation = -1

    def _migrate(self) -> None:
        """Apply the numbered migrations this file has not seen, each in one transaction."""
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version > len(MIGRATIONS):
            raise StoreError(
                f"{self.path} has schema version {version}; this toolscout knows"
                f" {len(MIGRATIONS)} (upgrade toolscout)"
            )
        for number in range(version, len(MIGRATIONS)):
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for statement in _statements(MIGRATIONS[number]):
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {number + 1}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def snapshot(self, dest: str | Path) -> Path:
        """A consistent copy of this file (SQLite's backup API); the store stays open."""
        target = Path(dest)
        with self._lock:
            dst = sqlite3.connect(str(target))
            try:
                self._db.backup(dst)
            finally:
                dst.close()
        return target

    def schema_version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _bump(self) -> None:
        """Inside a write transaction: the next generation."""
        self._db.execute(
            "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)"
            " WHERE key = 'generation'"
        )

    def local_writes(self) -> int:
        """Rows changed through this store's connection so far (SQLite's ``total_changes``):
        a catalog that reuses a generation read tells its own process's writes by it."""
        return self._db.total_changes

    def generation(self) -> int:
        """The committed generation; derived in-memory indexes are dropped when it moved."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
            gen = int(row[0]) if row else 0
            if gen != self._seen_generation:
                self._invalidate()
                self._seen_generation = gen
            return gen

    # -- writing -----------------------------------------------------------------
    def upsert(
        self,
        tools: Sequence[IndexedTool],
        vectors: Mapping[str, Vector],
        *,
        model_id: str,
        replace_all: bool = False,
        unchanged: Sequence[str] = (),
    ) -> UpsertStats:
        added = updated = n_unchanged = removed = 0
        now = time.time()
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise StoreError(f"cannot write to {self.path}: {exc}") from None
            try:
                existing = dict(self._db.execute("SELECT id, content_hash FROM tools").fetchall())
                for th, vec in vectors.items():
                    self._db.execute(
                        "INSERT OR REPLACE INTO vectors(text_hash, model_id, vec) VALUES (?,?,?)",
                        (th, model_id, np.asarray(vec, dtype=np.float32).tobytes()),
                    )
                needed = uncached_texts(tools, vectors)
                require_vectors(set(needed) - self._cached_locked(needed, model_id), model_id)
                plan = plan_upsert(
                    tools, existing, replace_all=replace_all, unchanged_ids=unchanged
                )
                added, updated, n_unchanged = plan.added, plan.updated, plan.unchanged
                for tool, chash in plan.changed:
                    self._write_tool(tool, chash, now)
                removed = self._delete_ids(plan.gone)
                if added or updated or removed or vectors:
                    self._bump()
                self._db.execute("COMMIT")
            except BaseException as exc:
                self._db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"cannot write to {self.path}: {exc}") from None
                raise
            if added or updated or removed or vectors:
                self._invalidate()
        return UpsertStats(added, updated, n_unchanged, removed, len(vectors))

    def content_hashes(self, ids: Sequence[str]) -> dict[str, str]:
        wanted = list(dict.fromkeys(ids))
        out: dict[str, str] = {}
        with self._lock:  # by id: an upstream's change of a few tools reads a few rows
            for chunk, marks in _chunks(wanted):
                out.update(
                    self._db.execute(
                        f"SELECT id, content_hash FROM tools WHERE id IN ({marks})", chunk
                    ).fetchall()
                )
        return out

    def _write_tool(self, tool: IndexedTool, chash: str, now: float) -> None:
        spec = tool.spec
        card = json.dumps(spec.card.to_dict())
        params = json.dumps(dict(spec.parameters))
        out = json.dumps(dict(spec.output_schema)) if spec.output_schema is not None else None
        row = self._db.execute("SELECT rid FROM tools WHERE id = ?", (spec.id,)).fetchone()
        if row is None:
            cur = self._db.execute(
                "INSERT INTO tools(id, card, parameters, output_schema, content_hash, updated_at)"
                " VALUES (?,?,?,?,?,?)",
                (spec.id, card, params, out, chash, now),
            )
            rid = cur.lastrowid
        else:
            rid = row[0]
            self._db.execute(
                "UPDATE tools SET card=?, parameters=?, output_schema=?, content_hash=?,"
                " updated_at=? WHERE rid=?",
                (card, params, out, chash, now, rid),
            )
            self._db.execute("DELETE FROM tool_fts WHERE rowid = ?", (rid,))
            self._db.execute("DELETE FROM tool_texts WHERE tool_id = ?", (spec.id,))
        values = [tool.fields.get(f, "") for f in FIELD_NAMES]
        self._db.execute(
            f"INSERT INTO tool_fts(rowid, {', '.join(FIELD_NAMES)}, scope) "
            f"VALUES (?{', ?' * len(FIELD_NAMES)}, ?)",
            (rid, *values, scope_value(spec.card.tenants)),
        )
        self._db.executemany(
            "INSERT OR IGNORE INTO tool_texts(tool_id, kind, text_hash) VALUES (?,?,?)",
            [(spec.id, kind, th) for kind, th in tool.texts],
        )

    def _delete_ids(self, ids: Sequence[str]) -> int:
        n = 0
        for tid in ids:
            row = self._db.execute("SELECT rid FROM tools WHERE id = ?", (tid,)).fetchone()
            if row is None:
                continue
            self._db.execute("DELETE FROM tool_fts WHERE rowid = ?", (row[0],))
            self._db.execute("DELETE FROM tools WHERE rid = ?", (row[0],))
            self._db.execute("DELETE FROM tool_texts WHERE tool_id = ?", (tid,))
            n += 1
        return n

    def delete(self, ids: Sequence[str]) -> int:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                n = self._delete_ids(ids)
                if n:
                    self._bump()
                self._db.execute("COMMIT")
            except BaseException as exc:
                self._db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"cannot write to {self.path}: {exc}") from None
                raise
            self._invalidate()
            return n

    def _invalidate(self) -> None:
        self._ids_by_rid = None
        self._id_rows = None
        self._scopes = None
        self._dense = None
        self._df = None

    # -- reading -----------------------------------------------------------------
    def cards(self) -> list[CapabilityCard]:
        with self._lock:
            rows = self._db.execute("SELECT card FROM tools ORDER BY rid").fetchall()
        return [_card_from_json(card) for (card,) in rows]

    def card_ids(self) -> list[str]:
        """Every tool id, in the order :meth:`cards` returns them (no card is parsed)."""
        with self._lock:
            return list(self._ids()[1])

    def _ids(self) -> tuple[list[int], list[str]]:
        """Every tool's rid and id in rid order, read once per generation (opening, the
        lexical and the dense index all need them: at 100k tools one read is ~0.2 s)."""
        with self._lock:
            if self._id_rows is None:
                rows = self._db.execute("SELECT rid, id FROM tools ORDER BY rid").fetchall()
                self._id_rows = ([r for r, _ in rows], [t for _, t in rows])
            return self._id_rows

    def cards_of(self, ids: Sequence[str]) -> dict[str, CapabilityCard]:
        """The cards of ``ids`` (unknown ids left out)."""
        out: dict[str, CapabilityCard] = {}
        with self._lock:
            for chunk, marks in _chunks(ids):
                for tid, card in self._db.execute(
                    f"SELECT id, card FROM tools WHERE id IN ({marks})", chunk
                ):
                    out[tid] = _card_from_json(card)
        return out

    def tenant_share(self, tenant: str) -> list[str]:
        """The ids of the tools offered to ``tenant`` or to every tenant, in catalog order:
        read from the lexical index's scope column (:func:`scope_value`), not the cards."""
        return [tid for tid, _ in self._share_rows(tenant, "id, NULL")]

    def tenant_cards(
        self, tenant: str, held: Container[str] = ()
    ) -> list[tuple[str, CapabilityCard | None]]:
        """The tools offered to ``tenant`` or to every tenant, in catalog order, with their
        cards (``None`` for the ids in ``held``, not parsed again): one read, where
        :meth:`tenant_share` then :meth:`cards_of` look every id up a second time."""
        return [
            (tid, None if tid in held else _card_from_json(raw))
            for tid, raw in self._share_rows(tenant, "id, card")
        ]

    def _share_rows(self, tenant: str, columns: str) -> list[tuple[str, Any]]:
        match = f'scope : ("{SHARED_SCOPE}" OR "{SCOPE_PREFIX}{tenant.encode().hex()}")'
        with self._lock:
            try:
                return self._db.execute(
                    f"SELECT {columns} FROM tools WHERE rid IN"
                    " (SELECT rowid FROM tool_fts WHERE tool_fts MATCH ?) ORDER BY rid",
                    (match,),
                ).fetchall()
            except sqlite3.OperationalError as exc:
                raise StoreError(f"reading the tools offered to {tenant!r} failed: {exc}") from exc

    def specs(self, ids: Sequence[str]) -> dict[str, ToolSpec]:
        out: dict[str, ToolSpec] = {}
        with self._lock:
            for chunk, marks in _chunks(ids):
                for card, params, o in self._db.execute(
                    f"SELECT card, parameters, output_schema FROM tools WHERE id IN ({marks})",
                    chunk,
                ):
                    spec = ToolSpec(
                        card=_card_from_json(card),
                        parameters=json.loads(params),
                        output_schema=json.loads(o) if o is not None else None,
                    )
                    out[spec.id] = spec
        return out

    def load(self) -> list[ToolSpec]:
        """Every stored tool with its schema, in insertion order."""
        cards = self.cards()
        specs = self.specs([c.id for c in cards])
        return [specs[c.id] for c in cards if c.id in specs]

    def texts_of(self, tool_id: str) -> list[tuple[str, str]]:
        with self._lock:
            return [
                (k, h)
                for k, h in self._db.execute(
                    "SELECT kind, text_hash FROM tool_texts WHERE tool_id = ? ORDER BY kind",
                    (tool_id,),
                )
            ]

    def _cached_locked(self, hashes: Sequence[str], model_id: str) -> set[str]:
        found: set[str] = set()
        for chunk, marks in _chunks(hashes):
            found.update(
                r[0]
                for r in self._db.execute(
                    f"SELECT text_hash FROM vectors WHERE model_id = ? AND text_hash IN ({marks})",
                    (model_id, *chunk),
                )
            )
        return found

    def cached(self, hashes: Sequence[str], model_id: str) -> set[str]:
        with self._lock:
            return self._cached_locked(hashes, model_id)

    def vectors_of(self, hashes: Sequence[str], model_id: str) -> dict[str, Vector]:
        out: dict[str, Vector] = {}
        with self._lock:
            for chunk, marks in _chunks(hashes):
                for th, blob in self._db.execute(
                    "SELECT text_hash, vec FROM vectors"
                    f" WHERE model_id = ? AND text_hash IN ({marks})",
                    (model_id, *chunk),
                ):
                    out[th] = np.frombuffer(blob, dtype=np.float32)
        return out

    def prepare_dense(self, model_id: str) -> None:
        """Map the dense index of ``model_id`` a process kept for this generation now, not
        on the first search (a new process does it while the query encoder loads). An index
        that must be built is left to the first search: a process that only opens the
        catalog (a refused import, a lint) writes nothing to it."""
        with self._lock:
            if self._dense is not None and self._dense_model == model_id:
                return
            generation = self.generation()
            index = self._kept_dense(model_id, generation, list(self._ids()[1]))
            if index is not None:
                self._dense = index
                self._dense_model = model_id

    def _dense_index(self, model_id: str) -> _DenseIndex:
        with self._lock:
            if self._dense is None or self._dense_model != model_id:
                generation = self.generation()  # before reading: a later write is not kept
                ids = list(self._ids()[1])
                index = self._kept_dense(model_id, generation, ids)
                if index is None:
                    index = self._build_dense(model_id, ids)
                    if str(self.path) != ":memory:":
                        sqlite_dense.keep(index, self.path, model_id, generation, self.set_derived)
                self._dense = index
                self._dense_model = model_id
            return self._dense

    def _kept_dense(self, model_id: str, generation: int, ids: list[str]) -> _DenseIndex | None:
        """The dense index a process kept beside this file for this generation, mapped."""
        if str(self.path) == ":memory:":
            return None
        kept = self.derived(sqlite_dense.kept_key(model_id))
        if kept is None or kept[0] != generation:
            return None
        return sqlite_dense.load(self.path, model_id, generation, ids, kept[1], self.dim)

    def _build_dense(self, model_id: str, ids: list[str]) -> _DenseIndex:
        pos = {t: i for i, t in enumerate(ids)}
        # each distinct vector is read once (tenants' copies share their texts: at
        # 100k tools, reading a blob per row was most of a new process's first search)
        vecs = {
            th: np.frombuffer(blob, dtype=np.float32)
            for th, blob in self._db.execute(
                "SELECT text_hash, vec FROM vectors WHERE model_id = ? AND text_hash IN"
                " (SELECT text_hash FROM tool_texts)",
                (model_id,),
            )
        }
        rows: list[tuple[int, str, str, Vector]] = []
        for tid, kind, th in self._db.execute("SELECT tool_id, kind, text_hash FROM tool_texts"):
            vec = vecs.get(th)
            if vec is not None and tid in pos:
                rows.append((pos[tid], kind, th, vec))
        return _DenseIndex.build(ids, rows, self.dim)

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
        return self._dense_index(model_id).search(vector, allowed, limit, kinds, also)

    def neighbours(
        self, vector: Vector, allowed: Set[str], *, kind: str, k: int, model_id: str = ""
    ) -> list[tuple[str, float]]:
        return _neighbours(self._dense_index(model_id), vector, allowed, kind, k)

    def card_vectors(self, ids: Sequence[str], model_id: str) -> dict[str, Vector]:
        """The ``card`` vector of each id (used for near-duplicate suppression)."""
        index = self._dense_index(model_id)
        out: dict[str, Vector] = {}
        for tid in ids:
            pos = index.position.get(tid)
            row = index.card_row.get(pos) if pos is not None else None
            if row is not None:
                out[tid] = index.vector_of_row(row)
        return out

    def second_connection(self) -> SQLiteStore | None:
        """Another connection to this file, for a background writer (WAL: this one's
        readers are not blocked while it writes); None for an in-memory store."""
        return None if str(self.path) == ":memory:" else SQLiteStore(self.path, dim=self.dim)

    def meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._write(
            [("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, str(value)))],
            bump=True,
        )

    def _write(self, statements: Sequence[tuple[str, Sequence[Any]]], *, bump: bool) -> None:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                for sql, params in statements:
                    self._db.execute(sql, params)
                if bump:
                    self._bump()
                self._db.execute("COMMIT")
            except BaseException as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"cannot write to {self.path}: {exc}") from None
                raise

    # -- learned phrases ------------------------------------------------------------
    def learned_add(self, pairs: Sequence[tuple[str, str, int]]) -> None:
        self._write(
            [
                (
                    "INSERT INTO learned_aliases(tool_id, phrase, uses) VALUES (?,?,?)"
                    " ON CONFLICT(tool_id, phrase) DO UPDATE SET uses = uses + excluded.uses",
                    pair,
                )
                for pair in pairs
            ],
            bump=False,
        )

    def learned(self, limit_per_tool: int) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        with self._lock:
            rows = self._db.execute(
                "SELECT tool_id, phrase FROM learned_aliases ORDER BY tool_id, uses DESC, phrase"
            ).fetchall()
        for tool_id, phrase in rows:
            bucket = out.setdefault(tool_id, [])
            if len(bucket) < limit_per_tool:
                bucket.append(phrase)
        return out

    def learned_clear(self) -> None:
        self._write([("DELETE FROM learned_aliases", ())], bump=False)


def _statements(script: str) -> list[str]:
    """Split a migration script into statements (``sqlite3.complete_statement`` aware)."""
    out: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out


__all__ = ["FIELD_NAMES", "LearnedAliases", "SQLiteStore"]
