"""Derived state kept in the SQLite store: a cache of what a catalog generation derives.

A blob per key (``derived``: token counts, the header of a map kept as rows) and derived
maps as rows (``derived_rows``: part, name -> value, under a token
the header names), both made on first use outside the numbered migrations. Writing never
bumps the generation; a write whose generation is no longer the current one is dropped,
and a failure to write only means the next process derives again. A background writer
writes the rows in short transactions (:meth:`DerivedState.set_derived_rows_in_steps`).
A map's key is ``name:digest`` (the digest names the code that built it); when a map, or a
blob whose key ends in such a digest, is kept for a generation, what other versions kept
of the same ``name`` for an older generation is removed: a generation only moves
forward, so no process reads it again (:meth:`DerivedState._drop_superseded`). What
another version kept for the current generation goes too once no process reads it: its
readers hold a shared lock on the file beside the catalog while they read it
(:meth:`DerivedState.hold_derived`), and it is removed only under an exclusive one. A map
kept by a toolscout before these locks (its header lacks the part :data:`HELD_PART`) has
readers that hold nothing, so it stays until the generation moves, as it did.

:class:`DerivedState` is a part of :class:`~toolscout.stores.sqlite.SQLiteStore` (its
base class), kept in a module of its own as ``sqlite_dense`` is for the dense index.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import suppress

from toolscout.stores import sqlite_holds
from toolscout.stores.base import HELD_PART

__all__ = ["DERIVED_STEP", "DerivedState"]

#: rows a background writer of derived state writes (or removes) per transaction
DERIVED_STEP = 20_000


#: the tables of derived state (made on first use, outside the numbered migrations)
_DERIVED_TABLE = (
    "CREATE TABLE IF NOT EXISTS derived (key TEXT PRIMARY KEY,"
    " generation INTEGER NOT NULL, blob BLOB NOT NULL)"
)
_DERIVED_ROWS_TABLE = (
    "CREATE TABLE IF NOT EXISTS derived_rows (token TEXT NOT NULL, part TEXT NOT NULL,"
    " name TEXT NOT NULL, pos INTEGER NOT NULL, value TEXT NOT NULL,"
    " PRIMARY KEY (token, part, name)) WITHOUT ROWID"
)

#: the number of rows each (token, part) holds, so a reader checks a kept map against its
#: header's counts with one row read instead of counting the part's rows (at 100k tools
#: ~1.4M rows: 0.28 s over pages not in memory, before a new process's first answer). The
#: writer adds what it inserts in the same transaction; the triggers take off what anyone
#: deletes or moves (a row lost by hand is seen as before). Rows kept by a toolscout
#: before this table have no count: they are counted (:meth:`DerivedState.derived_count`).
_DERIVED_COUNTS_TABLE = (
    "CREATE TABLE IF NOT EXISTS derived_counts (token TEXT NOT NULL, part TEXT NOT NULL,"
    " n INTEGER NOT NULL, PRIMARY KEY (token, part)) WITHOUT ROWID"
)
_DERIVED_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS derived_rows_gone AFTER DELETE ON derived_rows BEGIN"
    " UPDATE derived_counts SET n = n - 1 WHERE token = old.token AND part = old.part; END",
    "CREATE TRIGGER IF NOT EXISTS derived_rows_moved AFTER UPDATE OF token, part ON"
    " derived_rows BEGIN"
    " UPDATE derived_counts SET n = n - 1 WHERE token = old.token AND part = old.part;"
    " UPDATE derived_counts SET n = n + 1 WHERE token = new.token AND part = new.part; END",
)
_INSERT_DERIVED_ROWS = (
    "INSERT INTO derived_rows(token, part, name, pos, value) VALUES (?, ?, ?, ?, ?)"
)
_ADD_COUNT = (
    "INSERT INTO derived_counts(token, part, n) VALUES (?, ?, ?)"
    " ON CONFLICT (token, part) DO UPDATE SET n = n + excluded.n"
)


def _make_row_tables(db: sqlite3.Connection) -> None:
    """Inside a write: the tables of maps kept as rows and their counts' triggers."""
    db.execute(_DERIVED_TABLE)
    db.execute(_DERIVED_ROWS_TABLE)
    db.execute(_DERIVED_COUNTS_TABLE)
    for trigger in _DERIVED_TRIGGERS:
        db.execute(trigger)


def _insert_rows(db: sqlite3.Connection, rows: Sequence[tuple[str, str, str, int, str]]) -> None:
    """Inside a write: ``rows`` (of one token and part) inserted, and counted."""
    if rows:
        db.executemany(_INSERT_DERIVED_ROWS, rows)
        db.execute(_ADD_COUNT, (rows[0][0], rows[0][1], len(rows)))


def _part_rows(
    token: str, part: str, items: Iterable[tuple[str, str]]
) -> list[tuple[str, str, str, int, str]]:
    """One part of a derived map as ``derived_rows`` rows, in key order (appended to the
    B-tree, not spread over it)."""
    rows = [(token, part, name, i, value) for i, (name, value) in enumerate(items)]
    rows.sort(key=lambda r: r[2])
    return rows


def _names_code(key: str) -> bool:
    """Whether ``key`` ends in a digest of the code that made its blob (``name:digest``,
    16 hex digits: token parts and counts, the crosslingual lexicon). Such a blob another
    version kept for an older generation is never read again, so keeping this version's
    drops it, as for maps; a key without one (the dense header's ends in its model) is
    left to its owner."""
    code = key.rpartition(":")[2]
    return len(code) == 16 and all(c in "0123456789abcdef" for c in code)


def _chunks(values: Sequence[str], size: int = 500) -> Iterator[tuple[list[str], str]]:
    """``values`` in pieces small enough for SQLite's ``IN (?, ...)``: each with its marks."""
    for start in range(0, len(values), size):
        chunk = list(values[start : start + size])
        yield chunk, ",".join("?" * len(chunk))


class DerivedState:
    """The derived-state methods of the SQLite store (over its connection and lock)."""

    _db: sqlite3.Connection
    _lock: threading.RLock

    def derived(self, key: str) -> tuple[int, bytes] | None:
        """The blob kept under ``key`` and the generation it was derived from, if any."""
        with self._lock:
            try:
                row = self._db.execute(
                    "SELECT generation, blob FROM derived WHERE key = ?", (key,)
                ).fetchone()
            except sqlite3.OperationalError:  # no derived state kept yet
                return None
        return None if row is None else (int(row[0]), bytes(row[1]))

    def derived_keys(self, prefix: str) -> list[tuple[str, int]]:
        """Every key kept that begins with ``prefix`` (the same derived state kept by another
        version of toolscout has its own key) and the generation each was derived from."""
        with self._lock:
            try:
                rows = self._db.execute(
                    "SELECT key, generation FROM derived WHERE substr(key, 1, ?) = ?",
                    (len(prefix), prefix),
                ).fetchall()
            except sqlite3.OperationalError:  # no derived state kept yet
                return []
        return [(str(key), int(generation)) for key, generation in rows]

    def set_derived(self, key: str, generation: int, blob: bytes) -> bool:
        """Keep ``blob`` as derived from ``generation`` if that is still the current one.

        A cache beside the catalog (its table is created on first use, outside the
        numbered migrations): the generation does not move, and a failure to write
        (a read-only file, a busy writer) only means the next process derives again."""
        return self._keep_derived(key, generation, blob)

    def _keep_derived(
        self,
        key: str,
        generation: int,
        blob: bytes,
        rows: tuple[str, Mapping[str, Iterable[tuple[str, str]]]] | None = None,
    ) -> bool:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute(_DERIVED_TABLE)
                row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
                if row is None or int(row[0]) != generation:
                    self._db.execute("ROLLBACK")
                    return False
                if rows is not None:
                    self._replace_rows(key, *rows)
                self._db.execute(
                    "INSERT OR REPLACE INTO derived(key, generation, blob) VALUES (?, ?, ?)",
                    (key, generation, blob),
                )
                self._db.execute("COMMIT")
            except (sqlite3.Error, ValueError):
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                return False
        if rows is not None or _names_code(key):
            with suppress(sqlite3.Error):
                self._drop_superseded(key, generation, DERIVED_STEP)
        return True

    def _replace_rows(
        self, key: str, token: str, parts: Mapping[str, Iterable[tuple[str, str]]]
    ) -> None:
        """Inside a write: the rows of ``key``'s previous header go, ``parts`` come in."""
        _make_row_tables(self._db)
        old = self._db.execute("SELECT blob FROM derived WHERE key = ?", (key,)).fetchone()
        if old is not None:
            with suppress(ValueError, TypeError, KeyError):
                stale = json.loads(old[0])["token"]
                self._db.execute("DELETE FROM derived_counts WHERE token = ?", (stale,))
                self._db.execute("DELETE FROM derived_rows WHERE token = ?", (stale,))
        for part, items in parts.items():
            _insert_rows(self._db, _part_rows(token, part, items))

    def set_derived_rows(
        self,
        key: str,
        generation: int,
        header: bytes,
        token: str,
        parts: Mapping[str, Iterable[tuple[str, str]]],
    ) -> bool:
        """Keep derived maps as rows (part, name → value) under ``token``, and ``header``
        (which names the token) under ``key``, in one transaction, if ``generation`` is
        still the current one; the rows of the header it replaces are removed."""
        return self._keep_derived(key, generation, header, (token, parts))

    def set_derived_rows_in_steps(
        self,
        key: str,
        generation: int,
        header: bytes,
        token: str,
        parts: Mapping[str, Iterable[tuple[str, str]]],
    ) -> bool:
        """:meth:`set_derived_rows` in many short transactions (for a background writer,
        so no other writer waits on it for long): the rows under ``token`` first (unread
        until a header names it), then the header in one short transaction if
        ``generation`` is still the current one, then the rows of the header it replaced.
        Rows of a write that did not finish are removed; True if the header was written."""
        step = DERIVED_STEP
        try:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                _make_row_tables(self._db)
                self._db.execute("COMMIT")
            for part, items in parts.items():
                rows = _part_rows(token, part, items)
                for start in range(0, len(rows), step):
                    with self._lock:
                        self._db.execute("BEGIN IMMEDIATE")
                        _insert_rows(self._db, rows[start : start + step])
                        self._db.execute("COMMIT")
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
                if row is None or int(row[0]) != generation:
                    self._db.execute("ROLLBACK")
                    self._drop_rows(token, list(parts), step)
                    return False
                old = self._db.execute("SELECT blob FROM derived WHERE key = ?", (key,)).fetchone()
                self._db.execute(
                    "INSERT OR REPLACE INTO derived(key, generation, blob) VALUES (?, ?, ?)",
                    (key, generation, header),
                )
                self._db.execute("COMMIT")
        except (sqlite3.Error, ValueError):
            with self._lock:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
            with suppress(sqlite3.Error):
                self._drop_rows(token, list(parts), step)
            return False
        with suppress(sqlite3.Error, ValueError, TypeError, KeyError):
            if old is not None:
                stale = json.loads(old[0])
                self._drop_rows(str(stale["token"]), list(stale["counts"]), step)
        with suppress(sqlite3.Error):
            self._drop_superseded(key, generation, step)
        return True

    def hold_derived(self, token: str) -> Callable[[], None] | None:
        """Hold the rows kept under ``token`` against removal while they are read
        (:func:`~toolscout.stores.sqlite_holds.hold`): the release, or None when they are
        being removed (the caller does not read them)."""
        return sqlite_holds.hold(str(getattr(self, "path", ":memory:")), token)

    def drop_superseded(self, key: str, generation: int) -> None:
        """:meth:`_drop_superseded` in short transactions, for a caller that has put this
        version's ``key`` in place of another version's it was reading (best effort)."""
        with suppress(sqlite3.Error):
            self._drop_superseded(key, generation, DERIVED_STEP)

    def _drop_superseded(self, key: str, generation: int, step: int) -> None:
        """Remove the maps other versions of toolscout kept under ``key``'s name for a
        generation older than ``generation``, and those kept for ``generation`` itself that
        no process reads (their header names :data:`HELD_PART` and no reader holds their
        token): the header first, so nothing reads rows without one, then the rows in
        short transactions. Without this, every upgrade left its predecessor's rows
        behind until the generation moved, or for good: ~80-110 MB for a 100k catalog."""
        name, sep, _ = key.rpartition(":")
        mine = self.derived(key)
        if not sep or mine is None or mine[0] != generation:
            return  # this version's not kept for it (a write that failed): no other goes
        for other, kept_generation in self.derived_keys(f"{name}:"):
            if other == key or kept_generation > generation:
                continue
            with self._lock:
                row = self._db.execute(
                    "SELECT blob FROM derived WHERE key = ? AND generation = ?",
                    (other, kept_generation),
                ).fetchone()
            header = _header(row[0]) if row is not None else None
            release = None
            if kept_generation == generation:  # read now, unless its readers say otherwise
                if header is None or HELD_PART not in header[1]:
                    continue
                release = sqlite_holds.unread(str(getattr(self, "path", ":memory:")), header[0])
                if release is None:
                    continue
            try:
                with self._lock:
                    self._db.execute("BEGIN IMMEDIATE")
                    try:
                        gone = self._db.execute(
                            "DELETE FROM derived WHERE key = ? AND generation = ? AND blob = ?",
                            (other, kept_generation, row[0] if row is not None else b""),
                        ).rowcount
                        self._db.execute("COMMIT")
                    except sqlite3.Error:
                        self._db.execute("ROLLBACK")
                        raise
            finally:
                if release is not None:
                    release()
            if gone and header is not None:  # not a map's header (a blob): no rows
                self._drop_rows(header[0], [p for p in header[1] if p != HELD_PART], step)

    def _drop_rows(self, token: str, parts: Sequence[str], step: int) -> None:
        """Remove the rows under ``token`` a range of keys at a time (short transactions),
        their counts first (then the triggers find nothing to count down)."""
        with self._lock, suppress(sqlite3.OperationalError):  # no counts kept yet
            self._db.execute("DELETE FROM derived_counts WHERE token = ?", (token,))
        for part in parts:
            while True:
                with self._lock:
                    last = self._db.execute(
                        "SELECT max(name) FROM (SELECT name FROM derived_rows WHERE token = ?"
                        " AND part = ? ORDER BY name LIMIT ?)",
                        (token, part, step),
                    ).fetchone()[0]
                    if last is None:
                        break
                    self._db.execute("BEGIN IMMEDIATE")
                    self._db.execute(
                        "DELETE FROM derived_rows WHERE token = ? AND part = ? AND name <= ?",
                        (token, part, last),
                    )
                    self._db.execute("COMMIT")

    def derived_rows(self, token: str, part: str, names: Sequence[str]) -> dict[str, str]:
        """The kept values of ``names`` in one part of a derived map (missing ones left out)."""
        out: dict[str, str] = {}
        with self._lock:
            for chunk, marks in _chunks(names):
                out.update(
                    self._db.execute(
                        "SELECT name, value FROM derived_rows WHERE token = ? AND part = ?"
                        f" AND name IN ({marks})",
                        (token, part, *chunk),
                    ).fetchall()
                )
        return out

    def derived_part(self, token: str, part: str) -> list[tuple[str, str]]:
        """Every row of one part of a derived map, in the order it was kept."""
        with self._lock:
            rows = self._db.execute(
                "SELECT name, value FROM derived_rows WHERE token = ? AND part = ? ORDER BY pos",
                (token, part),
            ).fetchall()
        return [(str(n), str(v)) for n, v in rows]

    def derived_differ(self, token: str, other: str, part: str) -> list[str]:
        """The names whose kept values differ between two maps' ``part`` (one query: a name
        kept in only one of them is left out)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT a.name FROM derived_rows AS a JOIN derived_rows AS b ON b.token = ?"
                " AND b.part = a.part AND b.name = a.name"
                " WHERE a.token = ? AND a.part = ? AND a.value != b.value",
                (other, token, part),
            ).fetchall()
        return [str(n) for (n,) in rows]

    def derived_count(self, token: str, part: str) -> int:
        """The rows one part of a derived map holds: its kept count (one row read), else,
        for rows kept before counts were (or by a toolscout that did not keep them),
        counted."""
        with self._lock:
            row = None
            with suppress(sqlite3.OperationalError):  # no counts kept yet
                row = self._db.execute(
                    "SELECT n FROM derived_counts WHERE token = ? AND part = ?", (token, part)
                ).fetchone()
            if row is None:
                row = self._db.execute(
                    "SELECT count(*) FROM derived_rows WHERE token = ? AND part = ?",
                    (token, part),
                ).fetchone()
        return int(row[0])


def _header(blob: bytes) -> tuple[str, list[str]] | None:
    """The token and parts a kept map's header names, or None for another blob."""
    try:
        header = json.loads(blob)
        return str(header["token"]), list(header["counts"])
    except (ValueError, KeyError, TypeError):
        return None
