"""The append-only, hash-chained audit log of every execution attempt.

One row per attempt, allowed or refused: who (subject, tenant), what (tool id
and a sha256 digest of the canonical JSON arguments — never the arguments),
the decision (``allowed`` / ``denied`` / ``error``), its reason code, the
latency and the result status. Each row's ``hash`` is
``sha256(prev_hash + canonical row)``, so editing, deleting or reordering a row
breaks the chain from that row on; :meth:`AuditLog.verify` finds the first bad
one. SQLite triggers refuse UPDATE and DELETE on the table; the chain catches
whoever drops them. (Cutting rows off the end leaves a shorter, valid chain:
keep the last hash elsewhere if that matters.)

The table lives in the catalog's database file, on its own connection.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from toolscout.errors import ConfigError, StoreError
from toolscout.schemas import check_arguments

GENESIS = "0" * 64
DECISIONS = ("allowed", "denied", "error")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit_log (
    id          INTEGER PRIMARY KEY,
    ts          REAL    NOT NULL,
    subject     TEXT    NOT NULL,
    tenant      TEXT    NOT NULL,
    tool_id     TEXT    NOT NULL,
    args_digest TEXT    NOT NULL,
    decision    TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    latency_ms  REAL    NOT NULL,
    status      TEXT    NOT NULL,
    prev_hash   TEXT    NOT NULL,
    hash        TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_log_ts ON audit_log (ts);
CREATE TRIGGER IF NOT EXISTS audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
"""

_COLUMNS = (
    "id, ts, subject, tenant, tool_id, args_digest, decision, reason, latency_ms, status, "
    "prev_hash, hash"
)
#: longest stored text field; anything the caller controls is cut to this
MAX_FIELD = 256


def canonical_json(value: Any) -> str:
    """Key-sorted, compact, UTF-8 JSON: the form digests and size limits are taken over.

    Non-finite numbers and nesting deeper than :data:`toolscout.schemas.MAX_DEPTH`
    are refused first (:class:`~toolscout.errors.ArgumentError`), so neither
    ``NaN`` nor a ``RecursionError`` can come out of here.
    """
    check_arguments(value)
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def args_digest(arguments: Mapping[str, Any] | str) -> str:
    """sha256 of the arguments' canonical JSON (or of an already canonical string)."""
    text = arguments if isinstance(arguments, str) else canonical_json(arguments)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One execution attempt as stored."""

    id: int
    ts: float
    subject: str
    tenant: str
    tool_id: str
    args_digest: str
    decision: str
    reason: str
    latency_ms: float
    status: str
    prev_hash: str
    hash: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def when(self) -> datetime:
        return datetime.fromtimestamp(self.ts).astimezone()


class Verification(NamedTuple):
    """The result of :meth:`AuditLog.verify`: ``(ok, first_bad_id, count)``."""

    ok: bool
    first_bad_id: int | None
    count: int  # type: ignore[assignment]  # shadows tuple.count on purpose

    def to_dict(self) -> dict[str, Any]:
        return dict(self._asdict())


def _row_hash(prev_hash: str, row: tuple[Any, ...]) -> str:
    """Hash of one row: ``row`` is (id, ts, subject, ..., status) without the hashes."""
    blob = json.dumps(list(row), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((prev_hash + blob).encode("utf-8", "surrogatepass")).hexdigest()


def _cut(text: str) -> str:
    return text if len(text) <= MAX_FIELD else text[: MAX_FIELD - 1] + "…"


class AuditLog:
    """Append-only audit table in a SQLite file; safe to share between threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            if str(path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(path), check_same_thread=False, isolation_level=None, timeout=30.0
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the audit log at {path}: {exc}") from None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def append(
        self,
        *,
        subject: str,
        tenant: str,
        tool_id: str,
        args_digest: str,
        decision: str,
        reason: str,
        latency_ms: float,
        status: str,
        ts: float | None = None,
    ) -> AuditRecord:
        """Write one record, chained to the last one, in a single immediate transaction."""
        if decision not in DECISIONS:
            raise ConfigError(f"decision must be one of {', '.join(DECISIONS)}, got {decision!r}")
        fields = (
            float(time.time() if ts is None else ts),
            _cut(subject),
            _cut(tenant),
            _cut(tool_id),
            args_digest,
            decision,
            _cut(reason),
            round(float(latency_ms), 3) if math.isfinite(latency_ms) else 0.0,
            _cut(status),
        )
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    last = self._conn.execute(
                        "SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1"
                    ).fetchone()
                    prev_id, prev_hash = (last[0], last[1]) if last else (0, GENESIS)
                    row_id = prev_id + 1
                    digest = _row_hash(prev_hash, (row_id, *fields))
                    self._conn.execute(
                        f"INSERT INTO audit_log ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        (row_id, *fields, prev_hash, digest),
                    )
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise StoreError(f"cannot write the audit log at {self.path}: {exc}") from None
        return AuditRecord(row_id, *fields, prev_hash, digest)

    def read(
        self,
        since: float | datetime | None = None,
        subject: str | None = None,
        limit: int | None = None,
    ) -> list[AuditRecord]:
        """Records in id order; ``limit`` keeps the most recent ones."""
        where: list[str] = []
        params: list[Any] = []
        if since is not None:
            where.append("ts >= ?")
            params.append(since.timestamp() if isinstance(since, datetime) else float(since))
        if subject is not None:
            where.append("subject = ?")
            params.append(subject)
        sql = f"SELECT {_COLUMNS} FROM audit_log"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        with self._lock:
            try:
                rows = self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the audit log at {self.path}: {exc}") from None
        return [AuditRecord(*r) for r in reversed(rows)]

    def _rows(self) -> Iterator[tuple[Any, ...]]:
        cursor = self._conn.execute(f"SELECT {_COLUMNS} FROM audit_log ORDER BY id")
        while batch := cursor.fetchmany(1000):
            yield from batch

    def verify(self) -> Verification:
        """Recompute the chain: ``(ok, first_bad_id, count)``."""
        prev_hash = GENESIS
        count = 0
        first_bad: int | None = None
        with self._lock:
            try:
                for row in self._rows():
                    count += 1
                    intact = row[-2] == prev_hash and _row_hash(prev_hash, row[:-2]) == row[-1]
                    if not intact and first_bad is None:
                        first_bad = int(row[0])
                    prev_hash = row[-1]
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the audit log at {self.path}: {exc}") from None
        return Verification(first_bad is None, first_bad, count)

    def count(self) -> int:
        with self._lock:
            (n,) = self._conn.execute("SELECT COUNT(*) FROM audit_log").fetchone()
        return int(n)
