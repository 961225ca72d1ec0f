"""The SQLite store's lexical index: FTS5 over the cards' fields, narrowed per tenant.

Each tool's row in ``tool_fts`` (rowid: the tool's) holds its lexical fields and a
``scope`` column of tenant tokens, so a search ranks the caller's share instead of
every tenant's copies; document frequencies come from ``tool_vocab``, read per term.

:class:`LexicalIndex` is a part of :class:`~toolscout.stores.sqlite.SQLiteStore` (its
base class), kept in a module of its own as ``sqlite_derived`` is for derived state.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from pathlib import Path
from typing import Any

from toolscout.errors import StoreError
from toolscout.stores.base import LEXICAL_FIELDS, Hits
from toolscout.stores.sqlite_dense import _PerAllowed

__all__ = ["SCOPE_PREFIX", "SHARED_SCOPE", "LexicalIndex", "scope_value"]

FIELD_NAMES = LEXICAL_FIELDS

#: the lexical index's last column holds one token per tenant a tool is offered to
#: (``zzscope`` + the tenant's UTF-8 bytes in hex), or :data:`SHARED_SCOPE` for a tool
#: every tenant may be offered; :meth:`SQLiteStore.lexical` restricts the match to the
#: caller's tokens so FTS5 ranks a tenant's share, not every tenant's copies
SCOPE_PREFIX = "zzscope"
SHARED_SCOPE = SCOPE_PREFIX + "all"

#: the scope filter is used while the rows its tokens cover are at most this share
#: of the catalog, and while the caller's allowed tools carry at most this many tokens
SCOPE_FILTER_SHARE = 0.5
SCOPE_FILTER_TOKENS = 8


def scope_value(tenants: Sequence[str]) -> str:
    """The scope column of a tool offered to ``tenants`` (none: every tenant)."""
    tokens = dict.fromkeys(SCOPE_PREFIX + t.encode().hex() for t in tenants)
    return " ".join(tokens) or SHARED_SCOPE


class _Scopes:
    """Each tool's scope tokens, and the scope filter of an allowed set (cached by the
    identity of the immutable set, as an entitlement is reused across requests)."""

    def __init__(self, rows: Iterable[tuple[str, str]]) -> None:
        self.of: dict[str, tuple[str, ...]] = {}
        self.rows: dict[str, int] = {}
        for tool_id, value in rows:
            tokens = tuple(value.split())
            self.of[tool_id] = tokens
            for token in tokens:
                self.rows[token] = self.rows.get(token, 0) + 1
        self._filters: _PerAllowed[str] = _PerAllowed()

    def filter(self, allowed: Set[str]) -> str:
        """An FTS5 expression matching every allowed tool's scope column, or "" when
        it would cover most of the catalog anyway (then it only costs)."""
        hit = self._filters.get(allowed)
        if hit is not None:
            return hit
        tokens: set[str] = set()
        for tool_id in allowed:
            tokens.update(self.of.get(tool_id, ()))
            if len(tokens) > SCOPE_FILTER_TOKENS:
                break
        covered = sum(self.rows.get(t, 0) for t in tokens)
        small = len(tokens) <= SCOPE_FILTER_TOKENS and covered <= SCOPE_FILTER_SHARE * len(self.of)
        return self._filters.put(allowed, " OR ".join(sorted(tokens)) if small and tokens else "")


class _Vocabulary(Mapping[str, int]):
    """Term -> how many tools' lexical fields hold it, read per term from ``tool_vocab``
    (then held); iterating reads it whole. The scope column's tokens are not terms."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock) -> None:
        self._db, self._lock = db, lock
        self._held: dict[str, int] = {}
        self._whole: dict[str, int] | None = None

    def get(self, term: str, default: Any = None) -> Any:
        if self._whole is not None:
            return self._whole.get(term, default)
        n = self._held.get(term)
        if n is None:
            self.read_ahead((term,))
            n = self._held[term]
        return n if n else default

    def read_ahead(self, terms: Iterable[str]) -> None:
        """Hold the counts of ``terms`` not held yet, read in one statement (:meth:`get`
        reads its one term through it; a request's new terms read at once)."""
        if self._whole is not None:
            return
        new = [t for t in dict.fromkeys(terms) if t not in self._held]
        got = dict.fromkeys(new, 0)
        ask = [t for t in new if not t.startswith(SCOPE_PREFIX)]
        with self._lock:
            for start in range(0, len(ask), 500):
                chunk = ask[start : start + 500]
                got.update(
                    self._db.execute(
                        "SELECT term, doc FROM tool_vocab WHERE term IN"
                        f" ({','.join('?' * len(chunk))})",
                        chunk,
                    ).fetchall()
                )
        self._held.update((t, int(n)) for t, n in got.items())

    def __getitem__(self, term: str) -> int:
        n = self.get(term, 0)
        if not n:
            raise KeyError(term)
        return int(n)

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and bool(self.get(term, 0))

    def _all(self) -> dict[str, int]:
        if self._whole is None:
            with self._lock:
                self._whole = dict(
                    self._db.execute(
                        "SELECT term, doc FROM tool_vocab WHERE term NOT GLOB ?",
                        (SCOPE_PREFIX + "*",),
                    ).fetchall()
                )
        return self._whole

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


class LexicalIndex:
    """The lexical-search methods of the SQLite store (over its connection, its lock and
    the per-generation maps the store resets on every write)."""

    path: Path
    _db: sqlite3.Connection
    _lock: threading.RLock
    _scopes: _Scopes | None
    _scopes_read: threading.Lock
    _ids_by_rid: dict[int, str] | None
    _df: _Vocabulary | None
    _n_docs: int
    _seen_generation: int

    def _ids(self) -> tuple[list[int], list[str]]:
        raise NotImplementedError

    def document_frequency(self) -> tuple[Mapping[str, int], int]:
        """Per-term document counts of the lexical index (each term's read from the index
        when first asked for: a 100k-tool vocabulary is not read whole for the few terms a
        request has), and the number of documents."""
        with self._lock:
            if self._df is None:
                self._df = _Vocabulary(self._db, self._lock)
                self._n_docs = self._db.execute("SELECT count(*) FROM tools").fetchone()[0]
            return self._df, self._n_docs

    def lexical(
        self,
        terms: Sequence[str],
        allowed: Set[str],
        limit: int,
        *,
        weights: Mapping[str, float],
    ) -> Hits:
        uniq = list(dict.fromkeys(t for t in terms if t))
        used = [f for f in FIELD_NAMES if weights.get(f, 0.0) > 0]
        if not uniq or not used or not allowed:
            return Hits()
        expr = " OR ".join('"' + t.replace('"', '""') + '"' for t in uniq)
        expr = "{" + " ".join(used) + "} : (" + expr + ")"
        bm25_weights = ", ".join(repr(float(weights.get(f, 0.0))) for f in (*FIELD_NAMES, ""))
        hits = Hits()
        with self._scopes_read:  # a read of the scopes under way ahead (prepare_lexical)
            pass
        with self._lock:
            ids_by_rid, scopes = self._lexical_maps()
            # FTS5 cannot filter by the allowed set inside the ranking, and ranks every match
            # before the first row comes back: the match is narrowed to the tenants the
            # allowed tools are offered to (when that is a small share of the catalog), then
            # the rows are read best first until ``limit`` allowed ones were seen (no join:
            # the rowid is mapped in memory)
            scope = scopes.filter(allowed)
            if scope:
                expr = f"({expr}) AND scope : ({scope})"
            try:
                cursor = self._db.execute(
                    f"SELECT rowid, bm25(tool_fts, {bm25_weights}) AS s FROM tool_fts"
                    " WHERE tool_fts MATCH ? ORDER BY s",
                    (expr,),
                )
                for rid, score in cursor:
                    tid = ids_by_rid.get(rid)
                    if tid is not None and tid in allowed:
                        hits.ids.append(tid)
                        hits.scores.append(-float(score))
                        if len(hits.ids) >= limit:
                            break
                cursor.close()
            except sqlite3.OperationalError as exc:
                raise StoreError(f"lexical search failed: {exc}") from exc
        return hits

    def _lexical_maps(self) -> tuple[dict[int, str], _Scopes]:
        """The rowid -> id map and each tool's scope tokens (read once per generation)."""
        with self._lock:
            if self._ids_by_rid is None:
                self._ids_by_rid = dict(zip(*self._ids(), strict=True))
            ids_by_rid = self._ids_by_rid
            if self._scopes is None:
                self._scopes = _Scopes(
                    (ids_by_rid[rid], scope)
                    for rid, scope in self._db.execute("SELECT rowid, scope FROM tool_fts")
                    if rid in ids_by_rid
                )
            return ids_by_rid, self._scopes

    def prepare_lexical(self) -> None:
        """Read every tool's scope tokens, which a process's first lexical search needs
        (~0.1 s at 20k tools), now (a new process does it while the query encoder loads).
        Read through a read-only connection of its own, so this connection's readers do
        not wait for it (a search waits only for the read under way, rather than doing it
        again), and used only if it was read at the generation this connection has seen."""
        with self._scopes_read:
            with self._lock:
                if self._scopes is not None or str(self.path) == ":memory:":
                    return
                seen = self._seen_generation
            try:
                side = sqlite3.connect(f"{Path(self.path).resolve().as_uri()}?mode=ro", uri=True)
            except sqlite3.Error:
                return
            try:
                side.execute("BEGIN")
                row = side.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
                rows = side.execute(
                    "SELECT t.id, f.scope FROM tool_fts AS f JOIN tools AS t ON t.rid = f.rowid"
                ).fetchall()
                side.execute("COMMIT")
            except sqlite3.Error:
                return
            finally:
                side.close()
            if row is None or int(row[0]) != seen:
                return  # another generation: the first search reads them as before
            scopes = _Scopes(rows)
            with self._lock:
                if self._seen_generation == seen and self._scopes is None:
                    self._scopes = scopes
