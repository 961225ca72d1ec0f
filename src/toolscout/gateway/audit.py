"""The append-only, keyed, hash-chained audit log of every execution attempt.

Every attempt is recorded, allowed or refused: who (subject, tenant), what (tool
id and a keyed digest of the canonical JSON arguments — never the arguments), the
decision (``allowed`` / ``denied`` / ``error``), its reason code, the latency and
the result status.

* A refusal is one row (``kind='record'``).
* An administrative change (an import, a deletion, a policy) is ``kind='admin'`` rows
  (:meth:`AuditLog.admin`): who, the action, the tool, and the tool's digest before →
  after in ``args_digest``; a refused attempt at administration is one too.
* A call that runs is two rows: the **attempt** (:meth:`AuditLog.begin`, status
  ``started``), written *before* the executor runs — if it cannot be written the
  call is refused — and the **outcome** (:meth:`AuditLog.complete`, ``ref`` = the
  attempt's id) written after. A call whose outcome row is missing ran (or may
  have run) and was never completed: that is visible, not silent.

Each row's ``hash`` is ``HMAC-SHA256(key, prev_hash + canonical row)`` when the
log has a key (plain sha256 without one), so editing, deleting, inserting or
reordering rows breaks the chain from that row on, and without the key nobody
can recompute it. The key never enters the database (only a short key id, so a
wrong key is told apart from tampering). Cutting rows off the end leaves a valid
shorter chain: export :meth:`AuditLog.head` (``count:hash``) somewhere else and
pass it to :func:`verify_file` to catch that. SQLite triggers refuse UPDATE and
DELETE; :func:`verify_file` reads the file read-only and reports missing
triggers or a missing table as failures. See ``docs/security.md`` for the
threat model.

Caller-controlled text (ids, subjects) is sanitised before it is stored: lone
surrogates and control characters never reach the database driver. The ``detail``
(a tool's exception text, an upstream error body) has its secrets — DSN passwords,
bearer tokens, keys — replaced by :func:`toolscout.redact.redact` first.
"""

from __future__ import annotations

import math
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import astuple
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolscout.errors import ConfigError, StoreError
from toolscout.gateway.audit_rows import (
    _COLUMNS,
    _INSERT,
    DECISIONS,
    GENESIS,
    MAX_DETAIL,
    STARTED,
    AuditRecord,
    _key_bytes,
    _key_id,
    _migrate,
    _read,
    _row_hash,
    _statements,
    args_digest,
    canonical_json,
    clean_text,
)
from toolscout.redact import redact

if TYPE_CHECKING:  # in audit_verify; still importable from here (see __getattr__)
    from toolscout.gateway.audit_verify import Head, Verification, read_file, verify_file

__all__ = [
    "GENESIS",
    "AuditLog",
    "AuditRecord",
    "Head",
    "Verification",
    "args_digest",
    "audit_path_for",
    "canonical_json",
    "clean_text",
    "read_file",
    "verify_file",
]


def __getattr__(name: str) -> Any:
    """The read-only side, moved to :mod:`toolscout.gateway.audit_verify`."""
    if name in ("Head", "Verification", "read_file", "verify_file"):
        from toolscout.gateway import audit_verify

        return getattr(audit_verify, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: attempts remembered in memory until their outcome (past this, the oldest is read back)
MAX_OPEN = 4096
#: the position of ``hash`` in a row's stored values (``_COLUMNS``' order)
_HASH = 11


class AuditLog:
    """Append-only audit table in a SQLite file; safe to share between threads.

    ``key`` (at least 16 bytes, kept outside the database) keys the chain and the
    argument digests. A log created with a key refuses to be appended to without
    it, or with another one. ``timeout_s`` is how long a write waits for a lock
    held by another writer before it fails (and the call is refused).
    """

    #: a row after this connection's own last row is one ``INSERT`` (see :meth:`_write_many`)
    _one_statement = True
    _head: tuple[int, str] | None = None

    def __init__(
        self, path: str | Path, *, key: str | bytes | None = None, timeout_s: float = 10.0
    ) -> None:
        self.path = Path(path)
        self._key = _key_bytes(key)
        try:
            if str(path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(path), check_same_thread=False, isolation_level=None, timeout=timeout_s
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._set_up(self._create_tables)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the audit log at {path}: {exc}") from None

    def _create_tables(self) -> None:
        for statement in _statements():
            self._conn.execute(statement)
        _migrate(self._conn)

    def _set_up(self, create: Callable[[], None]) -> None:
        """In one write transaction on the open connection: the tables (``create``), the
        key check and the salt; then the log's in-process state. Nothing is kept when
        any step fails."""
        self._conn.execute("BEGIN IMMEDIATE")  # one opener creates the tables, others wait
        try:
            create()
            self._check_key()
            self._salt = self._key or self._digest_salt()
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._lock = threading.Lock()
        #: attempts begun here and not completed yet (their stored values), by id, so
        #: :meth:`complete` chains the outcome without reading the attempt back
        self._open: dict[int, tuple[Any, ...]] = {}
        #: (id, hash) of the last row this connection wrote, while it may still be the last
        self._head = None

    def _check_key(self) -> None:
        row = self._conn.execute("SELECT value FROM audit_meta WHERE key = 'key_id'").fetchone()
        mine = _key_id(self._key)
        if row is None:
            (rows,) = self._conn.execute("SELECT COUNT(*) FROM audit_log").fetchone()
            if rows == 0 or self._key is None:
                self._conn.execute("INSERT INTO audit_meta VALUES ('key_id', ?)", (mine,))
                return
            raise ConfigError(
                f"the audit log at {self.path} was written without a key; "
                "keep using it without one, or start a new log file"
            )
        if row[0] != mine:
            (rows,) = self._conn.execute("SELECT COUNT(*) FROM audit_log").fetchone()
            if rows == 0 and row[0] == "":  # an empty unkeyed log (another command's): keyed
                self._conn.execute("UPDATE audit_meta SET value = ? WHERE key = 'key_id'", (mine,))
                return
            if row[0] == "":
                raise ConfigError(
                    f"the audit log at {self.path} was written without a key, and a key was "
                    "given; keep using it without one (unset TOOLSCOUT_AUDIT_KEY), or start a "
                    "new log file"
                )
            raise ConfigError(
                f"the audit log at {self.path} is keyed and the key given "
                + ("does not match it" if self._key is not None else "is missing")
                + " (set TOOLSCOUT_AUDIT_KEY)"
            )

    @property
    def keyed(self) -> bool:
        return self._key is not None

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _digest_salt(self) -> bytes:
        """An unkeyed log's random salt for argument digests (kept in the log itself).

        It stops precomputed tables, not a guess by someone who can read the file:
        only a key does that.
        """
        row = self._conn.execute(
            "SELECT value FROM audit_meta WHERE key = 'digest_salt'"
        ).fetchone()
        if row is not None:
            return bytes.fromhex(row[0])
        salt = secrets.token_bytes(32)
        self._conn.execute("INSERT INTO audit_meta VALUES ('digest_salt', ?)", (salt.hex(),))
        return salt

    def digest(self, arguments: Mapping[str, Any] | str) -> str:
        """:func:`args_digest` with this log's key (or, unkeyed, its random salt)."""
        return args_digest(arguments, self._salt)

    # ------------------------------------------------------------------ writing

    def _write(self, fields: tuple[Any, ...], kind: str, ref: int, detail: str = "") -> AuditRecord:
        return AuditRecord(*self._write_one((fields, kind, ref, detail)))

    def _write_one(self, row: tuple[tuple[Any, ...], str, int, str]) -> tuple[Any, ...]:
        """:meth:`_write_many` for one row (it comes here): its stored values (``_COLUMNS``'
        order)."""
        with self._lock:
            if self._head is not None and self._one_statement:
                values = self._append_after(self._head, row)
                if values is not None:
                    return values
            (record,) = self._write_locked([row])
        return astuple(record)

    def _write_many(self, rows: list[tuple[tuple[Any, ...], str, int, str]]) -> list[AuditRecord]:
        """Chain and insert ``rows`` (fields, kind, ref, detail) in one transaction.

        One row after a row this connection wrote is one statement: an ``INSERT`` (its own
        transaction) with the next id, chained to the head remembered here. The id is the
        table's primary key, and rows are never updated or deleted, so the insert succeeds
        only if no other writer appended since: the remembered head was the last row. On a
        conflict (another connection or process wrote), the head is read under ``BEGIN
        IMMEDIATE`` as for several rows. Either way the row is committed when this returns
        (WAL, ``synchronous=NORMAL``: it survives the process; a power cut may lose the
        last rows)."""
        if len(rows) == 1:
            return [AuditRecord(*self._write_one(rows[0]))]
        with self._lock:
            return self._write_locked(rows)

    def _chained(
        self, prev: tuple[int, str], row: tuple[tuple[Any, ...], str, int, str]
    ) -> tuple[Any, ...]:
        """The stored values (``_COLUMNS``' order) of ``row`` chained after ``prev``."""
        fields, kind, ref, detail = row
        detail = clean_text(redact(detail), MAX_DETAIL) if detail else ""
        row_id, prev_hash = prev[0] + 1, prev[1]
        digest = _row_hash(prev_hash, (row_id, *fields, kind, ref, detail), self._key)
        return (row_id, *fields, prev_hash, digest, kind, ref, detail)

    def _append_after(
        self, head: tuple[int, str], row: tuple[tuple[Any, ...], str, int, str]
    ) -> tuple[Any, ...] | None:
        """``row`` as the row after ``head`` in one autocommitted ``INSERT``: its stored
        values; ``None`` when another writer took that id (nothing was written)."""
        values = self._chained(head, row)
        try:
            self._conn.execute(_INSERT, values)
        except sqlite3.IntegrityError:
            self._head = None
            return None
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write the audit log at {self.path}: {exc}") from None
        self._head = (values[0], values[_HASH])
        return values

    def _write_locked(self, rows: list[tuple[tuple[Any, ...], str, int, str]]) -> list[AuditRecord]:
        written: list[AuditRecord] = []
        self._head = None
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                last = self._conn.execute(
                    "SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1"
                ).fetchone()
                head = (last[0], last[1]) if last else (0, GENESIS)
                for row in rows:
                    values = self._chained(head, row)
                    self._conn.execute(_INSERT, values)
                    written.append(record := AuditRecord(*values))
                    head = (record.id, record.hash)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write the audit log at {self.path}: {exc}") from None
        self._head = head
        return written

    @staticmethod
    def _fields(
        subject: str,
        tenant: str,
        tool_id: str,
        args_digest: str,
        decision: str,
        reason: str,
        latency_ms: float,
        status: str,
        ts: float | None,
        *,
        stored: bool = False,
    ) -> tuple[Any, ...]:
        """The stored fields (``stored``: the first four come from a stored row, already
        cleaned, as :func:`clean_text` leaves its own output unchanged)."""
        if decision not in DECISIONS:
            raise ConfigError(f"decision must be one of {', '.join(DECISIONS)}, got {decision!r}")
        latency = float(latency_ms)
        who = (
            (subject, tenant, tool_id, args_digest)
            if stored
            else (clean_text(subject), clean_text(tenant), clean_text(tool_id),
                  clean_text(args_digest))
        )  # fmt: skip
        return (
            float(time.time() if ts is None else ts),
            *who,
            decision,
            clean_text(reason),
            round(latency, 3) if math.isfinite(latency) else 0.0,
            clean_text(status),
        )

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
        detail: str = "",
    ) -> AuditRecord:
        """Write one complete record (a refusal), chained to the last one."""
        fields = self._fields(
            subject, tenant, tool_id, args_digest, decision, reason, latency_ms, status, ts
        )
        return self._write(fields, "record", 0, detail)

    def admin(
        self,
        *,
        subject: str,
        tenant: str,
        action: str,
        target: str,
        before: str = "",
        after: str = "",
        decision: str = "allowed",
        reason: str = "ok",
        status: str = "changed",
        detail: str = "",
    ) -> AuditRecord:
        """Write one administrative row: ``target`` (a tool id, or ``catalog`` / ``policy``)
        changed by ``action`` from the ``before`` digest to the ``after`` one ("" where
        it did not or will not exist)."""
        (record,) = self.admin_many(
            subject=subject,
            tenant=tenant,
            action=action,
            changes=[(target, before, after)],
            decision=decision,
            reason=reason,
            status=status,
            detail=detail,
        )
        return record

    def admin_many(
        self,
        *,
        subject: str,
        tenant: str,
        action: str,
        changes: list[tuple[str, str, str]],
        decision: str = "allowed",
        reason: str = "ok",
        status: str = "changed",
        detail: str = "",
    ) -> list[AuditRecord]:
        """:meth:`admin` for many (target, before, after) changes, in one transaction (a
        100k-tool import is one write, and all of its rows or none)."""
        why = f"admin:{action}" if reason == "ok" else reason
        rows = [
            (
                self._fields(subject, tenant, target, f"{before or '-'}->{after or '-'}",
                             decision, why, 0.0, status, None),
                "admin",
                0,
                detail,
            )
            for target, before, after in changes
        ]  # fmt: skip
        return self._write_many(rows) if rows else []

    def begin(
        self,
        *,
        subject: str,
        tenant: str,
        tool_id: str,
        args_digest: str,
        reason: str = "ok",
        ts: float | None = None,
    ) -> int:
        """Record an attempt that is about to run; returns its id for :meth:`complete`.

        Raises :class:`StoreError` when it cannot be written: the caller must not
        run the tool then.
        """
        fields = self._fields(
            subject, tenant, tool_id, args_digest, "allowed", reason, 0.0, STARTED, ts
        )
        values = self._write_one((fields, "attempt", 0, ""))
        with self._lock:
            if len(self._open) >= MAX_OPEN:  # never completed (a crashed caller): forget one
                self._open.pop(next(iter(self._open)))
            self._open[values[0]] = values
        return int(values[0])

    def complete(
        self,
        attempt_id: int,
        *,
        status: str,
        reason: str,
        latency_ms: float,
        decision: str | None = None,
        detail: str = "",
        retries: int = 3,
    ) -> AuditRecord:
        """Record the outcome of attempt ``attempt_id`` (a second, chained row).

        Retries a busy database a few times; if it still fails the attempt row
        stays, showing a call that ran without a recorded outcome.
        """
        attempt_id = int(attempt_id)
        with self._lock:
            attempt = self._open.pop(attempt_id, None)
            if attempt is None:  # begun by another log object or process: read it back
                attempt = self._conn.execute(
                    f"SELECT {_COLUMNS} FROM audit_log WHERE id = ? AND kind = 'attempt'",
                    (attempt_id,),
                ).fetchone()
        if attempt is None:
            raise ConfigError(f"no audit attempt with id {attempt_id}")
        if decision is None:
            decision = "allowed" if status == "ok" else "error"
        _, _, subject, tenant, tool_id, digest = attempt[:6]  # _COLUMNS' order
        fields = self._fields(
            subject,
            tenant,
            tool_id,
            digest,
            decision,
            reason,
            latency_ms,
            status,
            None,
            stored=True,  # the attempt's own fields were cleaned when it was written
        )
        for attempt_no in range(retries):
            try:
                return self._write(fields, "outcome", attempt_id, detail)
            except StoreError:
                if attempt_no == retries - 1:
                    raise
                time.sleep(0.05 * (attempt_no + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ reading

    def read(
        self,
        since: float | datetime | None = None,
        subject: str | None = None,
        limit: int | None = None,
        *,
        outcomes: bool = False,
    ) -> list[AuditRecord]:
        """Records in id order; ``limit`` keeps the most recent ones.

        ``outcomes=True`` gives one row per attempt: refusals, outcomes, and the
        attempt rows that have no outcome (running, or their outcome was lost).
        """
        with self._lock:
            return _read(self._conn, self.path, since, subject, limit, outcomes)

    def head(self) -> Head:
        """``(count, hash)`` of the last row: export it to catch truncation later."""
        from toolscout.gateway.audit_verify import _head

        with self._lock:
            return _head(self._conn, self.path)

    def verify(self, expected_head: Head | str | None = None) -> Verification:
        """Recompute the chain with this log's key; compare with ``expected_head`` if given."""
        from toolscout.gateway.audit_verify import _verify

        with self._lock:
            return _verify(self._conn, self.path, self._key, expected_head)

    def count(self) -> int:
        with self._lock:
            (n,) = self._conn.execute("SELECT COUNT(*) FROM audit_log").fetchone()
        return int(n)


def audit_path_for(db: str | Path) -> Path:
    """Where the audit log of catalog ``db`` lives: its own file next to it.

    ``tools.db`` → ``tools.audit.db``: catalog writes (a long ``index``) never
    block the audit, and the audit can be kept on other storage.
    """
    db = Path(db)
    return db.with_name(f"{db.stem}.audit{db.suffix or '.db'}")
