"""The discovery log: what was asked, what was shown, what was then executed.

Writes are held in memory and written by one background thread in batches, so logging
never blocks discovery or a call: the thread is woken by the first record of a batch,
lets records gather for :data:`GATHER_S`, and writes them in one transaction; ``flush``,
a reader, ``close`` and the process's exit write what is held at once. Every row carries
the caller's tenant and, when the surface knows it, the conversation, so the
false-negative report can tell a miss (a tool was executed that the preceding discovery
did not show) and a second search (the same conversation searched again before the
call).

What is kept of the query text is a setting: ``"text"`` keeps it; ``"hash"``
keeps a keyed SHA-256 of its normalised form (repeats can be counted, the text
cannot be read back); ``"none"`` keeps neither, and the report still counts.
Text is kept for a bounded time, ``query_text_days`` (:data:`QUERY_TEXT_DAYS` by
default): older rows keep only the hash (at open, and every 1000 writes), so the
false-negative report shows recent missed queries and counts the older ones.
Rows are pruned by age with ``prune`` (or ``retention_days`` at open); deleted
pages are zeroed (``secure_delete``) so pruned text does not linger in the file.

:class:`DiscoveryLog` keeps the log in a SQLite file (the catalog's own);
:class:`~toolscout.telemetry.log_postgres.PostgresDiscoveryLog` is the same log in a
PostgreSQL database that several replicas share. Everything but the connection is
this class's: a subclass gives its :class:`Dialect` (table names, the column that
orders rows oldest first, the placeholder) and the methods marked *backend* below.
:func:`open_log` chooses between the two from the catalog's target.

The log's parts: its tables and SQL dialect (telemetry/log_tables.py), the row types
its readers get (telemetry/log_rows.py) and its queries (telemetry/log_reads.py, mixed
into :class:`DiscoveryLog`), its writer thread and batches (telemetry/log_writer.py, mixed
in too); this module holds the statements written and is their public face.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from toolscout.errors import ConfigError
from toolscout.settings import QUERY_TEXT_DAYS
from toolscout.stores.dsn import is_dsn
from toolscout.telemetry.log_reads import LogReads
from toolscout.telemetry.log_rows import DiscoveryRow, EventRow, FalseNegative
from toolscout.telemetry.log_tables import (
    _DISCOVERIES,
    _INDEXES,
    _REDUCE_TEXT,
    _SCHEMA,
    _UPGRADES,
    SQLITE,
    Dialect,
)
from toolscout.telemetry.log_writer import (
    GATHER_S,
    MAX_PENDING,
    WRITE_BATCH,
    HeldWrites,
    flush_open_logs,
)

__all__ = [
    "GATHER_S",
    "LOW_CONFIDENCE",
    "MAX_PENDING",
    "QUERY_LOG_MODES",
    "SQLITE",
    "WRITE_BATCH",
    "Dialect",
    "DiscoveryLog",
    "DiscoveryRow",
    "EventRow",
    "FalseNegative",
    "LogReads",
    "flush_open_logs",
    "normalise_query",
    "open_log",
]

#: what the log may keep of a query
QUERY_LOG_MODES = ("text", "hash", "none")
#: a discovery below this confidence counts as low-confidence when the caller does not say
LOW_CONFIDENCE = 0.45


def normalise_query(query: str) -> str:
    return " ".join(query.split()).casefold()


def open_log(
    target: str | Path,
    *,
    query_log: str = "text",
    retention_days: float | None = None,
    query_text_days: float | None = QUERY_TEXT_DAYS,
) -> DiscoveryLog | None:
    """The discovery log kept beside the catalog at ``target``.

    A ``postgresql://`` DSN: the log in that database (shared by every replica on it);
    a file path: the log in that SQLite file; an in-memory catalog keeps none."""
    text = str(target)
    if is_dsn(text):
        from toolscout.telemetry.log_postgres import PostgresDiscoveryLog

        return PostgresDiscoveryLog(
            text,
            query_log=query_log,
            retention_days=retention_days,
            query_text_days=query_text_days,
        )
    if text in (":memory:", "memory:") or "://" in text:
        return None
    return DiscoveryLog(
        target,
        query_log=query_log,
        retention_days=retention_days,
        query_text_days=query_text_days,
    )


class DiscoveryLog(HeldWrites, LogReads):
    """Append-only log of discoveries and the executions and feedback that followed them."""

    dialect: ClassVar[Dialect] = SQLITE

    def __init__(
        self,
        path: str | Path,
        *,
        query_log: str = "text",
        retention_days: float | None = None,
        query_text_days: float | None = QUERY_TEXT_DAYS,
    ) -> None:
        if query_log not in QUERY_LOG_MODES:
            raise ConfigError(
                f"query_log must be one of {', '.join(QUERY_LOG_MODES)}, got {query_log!r}"
            )
        if retention_days is not None and retention_days <= 0:
            raise ConfigError(f"retention_days must be positive, got {retention_days}")
        if query_text_days is not None and not query_text_days > 0:
            raise ConfigError(f"query_text_days must be positive, got {query_text_days}")
        self.path = str(path)
        self.query_log = query_log
        self.retention_days = retention_days
        #: query text older than this many days is reduced to its hash (None: kept)
        self.query_text_days = query_text_days
        self._sql: dict[str, str] = {}
        self._lock = threading.Lock()
        self._connect(self.path)
        self._key = self._hash_key()
        #: the key padded and hashed once: each query's digest starts from a copy of it
        self._keyed = hmac.new(self._key, digestmod=hashlib.sha256)
        self._enforce_mode()
        self._init_writer()
        self._writes = 0
        if retention_days is not None:
            self.prune(retention_days)
        if query_text_days is not None and query_log == "text":
            self.reduce_query_text(query_text_days)

    # -- backend: SQLite ---------------------------------------------------------
    def _connect(self, location: str) -> None:
        """Open the database at ``location`` and create (or upgrade) the tables."""
        self._db = sqlite3.connect(location, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # as the store and the audit log: a commit survives the process, a power cut may
        # lose the last ones (FULL synced the file at every batch, on the writer's thread)
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA secure_delete=ON")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        self._upgrade()
        self._db.executescript(_INDEXES)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        return int(self._db.execute(sql, tuple(params)).rowcount)

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._db.execute(sql, tuple(params)).fetchall()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN")
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:  # also when COMMIT itself failed (busy)
                self._db.execute("ROLLBACK")
            raise

    def _connected(self) -> bool:
        """Is the database within reach (after a statement failed)?"""
        return True

    def _compact(self) -> None:
        """After rows were deleted or scrubbed: let no copy of them linger."""
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _disconnect(self) -> None:
        self._db.close()

    def _upgrade(self) -> None:
        for table, columns in _UPGRADES.items():
            have = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            for name, decl in columns:
                if name not in have:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
        # the first version required query text; a NOT NULL column cannot be relaxed in place
        info = {row[1]: row[3] for row in self._db.execute("PRAGMA table_info(discoveries)")}
        if info.get("query"):
            cols = "id, ts, subject, tenant, conversation, query, query_hash, shown, confidence, " \
                   "low, latency_ms"  # fmt: skip
            self._db.executescript(
                "BEGIN;"
                "ALTER TABLE discoveries RENAME TO discoveries_v1;"
                f"{_DISCOVERIES};"
                f"INSERT INTO discoveries ({cols}) SELECT {cols} FROM discoveries_v1;"
                "DROP TABLE discoveries_v1;"
                "COMMIT;"
            )

    # -- shared by every backend -------------------------------------------------
    def _render(self, template: str) -> str:
        sql = self._sql.get(template)
        if sql is None:
            sql = self._sql[template] = self.dialect.render(template)
        return sql

    def _enforce_mode(self) -> None:
        """Rows written under a laxer setting are brought down to this one."""
        if self.query_log == "text":
            return
        rows = self._fetch(
            self._render(
                "SELECT id, query FROM {discoveries} WHERE query IS NOT NULL"
                + (" OR query_hash IS NOT NULL" if self.query_log == "none" else "")
                + " ORDER BY id"
            )
        )
        if not rows:
            return
        update = self._render(
            "UPDATE {discoveries} SET query = NULL, query_hash = coalesce(?, "
            + ("query_hash" if self.query_log == "hash" else "NULL")
            + ") WHERE id = ?"
        )
        with self._transaction():
            for did, query in rows:
                digest = self.query_hash(query) if self.query_log == "hash" and query else None
                self._execute(update, (digest, did))
        self._compact()

    def _hash_key(self) -> bytes:
        """A random key per database, so query hashes are not a public dictionary.

        Inserted if absent, then read: every process on one database uses the first key."""
        key = secrets.token_bytes(32)
        self._execute(
            self._render(
                "INSERT INTO {log_meta} (key, value) VALUES ('hash_key', ?)"
                " ON CONFLICT (key) DO NOTHING"
            ),
            (key.hex(),),
        )
        row = self._fetch(self._render("SELECT value FROM {log_meta} WHERE key = 'hash_key'"))
        return bytes.fromhex(str(row[0][0]))

    def query_hash(self, query: str) -> str:
        """The keyed digest this log stores for ``query`` in "hash" (and "text") mode."""
        digest = self._keyed.copy()
        digest.update(normalise_query(query).encode())
        return digest.hexdigest()[:32]

    # -- writing (the thread, the batches: telemetry/log_writer.py) ------------------
    def _put(self, template: str, params: tuple[Any, ...]) -> None:
        if not self._hold(self._render(template), params):
            return
        self._writes += 1
        if self.retention_days is not None and self._writes % 1000 == 0:
            cutoff = time.time() - self.retention_days * 86400
            self._put("DELETE FROM {discoveries} WHERE ts < ?", (cutoff,))
            self._put("DELETE FROM {calls} WHERE ts < ?", (cutoff,))
        if self.query_text_days is not None and self._writes % 1000 == 0:
            cutoff = time.time() - self.query_text_days * 86400
            self._put(_REDUCE_TEXT, (cutoff,))

    def record_discovery(
        self,
        subject: str,
        tenant: str,
        query: str,
        shown: Sequence[str],
        confidence: float,
        latency_ms: float,
        *,
        conversation: str | None = None,
        low_confidence: bool | None = None,
    ) -> str:
        """Log one discovery; returns its id (the one executions and feedback link to)."""
        did = uuid.uuid4().hex
        text = " ".join(query.split()) if self.query_log == "text" else None
        digest = self.query_hash(query) if self.query_log != "none" else None
        low = confidence < LOW_CONFIDENCE if low_confidence is None else low_confidence
        self._put(
            "INSERT INTO {discoveries} (id, ts, subject, tenant, conversation, query, query_hash,"
            " shown, confidence, low, latency_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                did,
                time.time(),
                subject,
                tenant,
                conversation,
                text,
                digest,
                json.dumps(list(shown)),
                confidence,
                int(low or not shown),
                latency_ms,
            ),
        )
        return did

    def record_call(
        self,
        tool_id: str,
        *,
        discovery_id: str | None,
        ok: bool,
        subject: str | None = None,
        tenant: str | None = None,
        conversation: str | None = None,
    ) -> None:
        """Log an execution; linked to ``discovery_id`` it becomes a miss if not shown there."""
        self._event("call", tool_id, discovery_id, ok, subject, tenant, conversation)

    def record_feedback(
        self,
        discovery_id: str,
        tool_id: str,
        *,
        subject: str | None = None,
        tenant: str | None = None,
        conversation: str | None = None,
    ) -> None:
        """Log that ``tool_id`` was the right tool for ``discovery_id`` (explicit feedback)."""
        self._event("feedback", tool_id, discovery_id, True, subject, tenant, conversation)

    def _event(
        self,
        kind: str,
        tool_id: str,
        discovery_id: str | None,
        ok: bool,
        subject: str | None,
        tenant: str | None,
        conversation: str | None,
    ) -> None:
        self._put(
            "INSERT INTO {calls} (ts, discovery_id, tool_id, ok, kind, subject, tenant,"
            " conversation) VALUES (?,?,?,?,?,?,?,?)",
            (time.time(), discovery_id, tool_id, int(ok), kind, subject, tenant, conversation),
        )

    def record_accepted(
        self,
        alias_id: str,
        tool_id: str,
        alias: str,
        tenant: str,
        evidence: dict[str, Any],
        source: str = "usage-report",
    ) -> None:
        """Remember that an alias was written into a card, where it came from and why."""
        self.flush()
        with self._lock:
            self._execute(
                self._render(
                    "INSERT INTO {accepted_aliases} (id, ts, tool_id, alias, tenant, source,"
                    " evidence) VALUES (?,?,?,?,?,?,?) ON CONFLICT (id) DO UPDATE SET"
                    " ts = excluded.ts, tool_id = excluded.tool_id, alias = excluded.alias,"
                    " tenant = excluded.tenant, source = excluded.source,"
                    " evidence = excluded.evidence"
                ),
                (alias_id, time.time(), tool_id, alias, tenant, source, json.dumps(evidence)),
            )

    def accepted(self) -> list[dict[str, Any]]:
        """Every accepted alias with its source and evidence, oldest first."""
        rows = self._rows(
            "SELECT id, ts, tool_id, alias, tenant, source, evidence FROM {accepted_aliases}"
            " ORDER BY ts, {seq}"
        )
        keys = ("id", "ts", "tool_id", "alias", "tenant", "source", "evidence")
        return [{**dict(zip(keys, r, strict=True)), "evidence": json.loads(r[6])} for r in rows]

    def prune(self, older_than_days: float) -> int:
        """Delete discoveries and events older than ``older_than_days``; returns rows removed."""
        if older_than_days < 0:
            raise ConfigError(f"a retention period must not be negative, got {older_than_days}")
        cutoff = time.time() - older_than_days * 86400
        self.flush()
        with self._lock:
            n = self._execute(self._render("DELETE FROM {discoveries} WHERE ts < ?"), (cutoff,))
            n += self._execute(self._render("DELETE FROM {calls} WHERE ts < ?"), (cutoff,))
            self._compact()
        return n

    def reduce_query_text(self, older_than_days: float) -> int:
        """Reduce the query text of discoveries older than ``older_than_days`` to its
        hash (kept beside it since it was written); returns the rows reduced."""
        if older_than_days < 0:
            raise ConfigError(f"a retention period must not be negative, got {older_than_days}")
        cutoff = time.time() - older_than_days * 86400
        self.flush()
        with self._lock:
            n = self._execute(self._render(_REDUCE_TEXT), (cutoff,))
            if n:
                self._compact()
        return n

    def close(self) -> None:
        """Write what is held, stop the writer, close the connection."""
        self._stop_writer()
        with self._lock:
            if self._closed:
                return
            self._write_all()
            self._closed = True
            self._disconnect()

    # -- reading -----------------------------------------------------------------
    def _rows(self, template: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            self._write_all()
            return self._fetch(self._render(template), params)
