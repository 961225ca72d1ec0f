"""The audit log in PostgreSQL: one hash chain for every replica of a service.

:class:`~toolscout.gateway.audit.AuditLog` keeps its chain in a SQLite file; a
service run as several replicas on one PostgreSQL keeps it in that database
instead, so there is one chain, not one per replica, and losing a replica's disk
loses no evidence. The rows, their hashes, the key check and every reader are
the SQLite log's own: this module only gives them a PostgreSQL connection.

* The tables live in their own schema, ``toolscout_audit`` (``audit_log``,
  ``audit_meta``), which an operator can own by another role than the catalog.
* Appends are serialised across processes by a transaction-scoped advisory lock
  taken where SQLite takes ``BEGIN IMMEDIATE``: two replicas never chain to the
  same predecessor.
* Triggers refuse UPDATE, DELETE and TRUNCATE of ``audit_log``; :meth:`verify`
  reports them missing as a failure, like :func:`~toolscout.gateway.audit.verify_file`.
* Times and latencies are ``double precision`` (``real`` would round them and
  break the chain on reading back).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from toolscout.errors import StoreError
from toolscout.gateway.audit import AuditLog
from toolscout.gateway.audit_rows import AuditRecord, _key_bytes, _read
from toolscout.gateway.audit_verify import Head, Verification, _judged, _verify
from toolscout.stores.dsn import redact
from toolscout.stores.pgsession import PgSession

#: the schema holding the audit tables
AUDIT_SCHEMA = "toolscout_audit"
#: the advisory lock key of the chain (any constant shared by every replica)
_CHAIN_LOCK = 0x7A5C_0A0D
PG_TRIGGERS = ("audit_log_append_only", "audit_log_no_truncate")
_LOG_TABLE = f"{AUDIT_SCHEMA}.audit_log"
_TABLES_SQL = "SELECT table_name FROM information_schema.tables WHERE table_schema = ?"
_TRIGGERS_SQL = "SELECT tgname FROM pg_trigger WHERE tgrelid = ?::regclass AND NOT tgisinternal"

_PG_SCHEMA = f"""
CREATE SCHEMA IF NOT EXISTS {AUDIT_SCHEMA};
CREATE TABLE IF NOT EXISTS {AUDIT_SCHEMA}.audit_log (
    id          BIGINT           PRIMARY KEY,
    ts          DOUBLE PRECISION NOT NULL,
    subject     TEXT             NOT NULL,
    tenant      TEXT             NOT NULL,
    tool_id     TEXT             NOT NULL,
    args_digest TEXT             NOT NULL,
    decision    TEXT             NOT NULL,
    reason      TEXT             NOT NULL,
    latency_ms  DOUBLE PRECISION NOT NULL,
    status      TEXT             NOT NULL,
    prev_hash   TEXT             NOT NULL,
    hash        TEXT             NOT NULL,
    kind        TEXT             NOT NULL DEFAULT 'record',
    ref         BIGINT           NOT NULL DEFAULT 0,
    detail      TEXT             NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS audit_log_ts ON {AUDIT_SCHEMA}.audit_log (ts);
CREATE INDEX IF NOT EXISTS audit_log_ref ON {AUDIT_SCHEMA}.audit_log (ref);
CREATE TABLE IF NOT EXISTS {AUDIT_SCHEMA}.audit_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE OR REPLACE FUNCTION {AUDIT_SCHEMA}.refuse_change() RETURNS trigger
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit_log is append-only'; END $$;
CREATE OR REPLACE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE
    ON {AUDIT_SCHEMA}.audit_log FOR EACH ROW EXECUTE FUNCTION {AUDIT_SCHEMA}.refuse_change();
CREATE OR REPLACE TRIGGER audit_log_no_truncate BEFORE TRUNCATE
    ON {AUDIT_SCHEMA}.audit_log FOR EACH STATEMENT EXECUTE FUNCTION {AUDIT_SCHEMA}.refuse_change();
"""

#: the schema text's digest, kept in ``audit_meta`` once the statements above have run
_SCHEMA_DIGEST = hashlib.sha256(_PG_SCHEMA.encode()).hexdigest()[:16]
_SCHEMA_KEY = "schema_digest"


class _Connection:
    """The audit log's :class:`~toolscout.stores.pgsession.PgSession`, spoken to in the
    SQLite log's dialect: ``?`` placeholders become ``%s``, and ``BEGIN IMMEDIATE``
    (SQLite's write lock) becomes ``BEGIN`` plus the chain's advisory lock."""

    def __init__(self, dsn: str, timeout_s: float, *, read_only: bool = False) -> None:
        lock_ms = int(timeout_s * 1000)  # how long an append waits for another's
        self._session = PgSession(
            dsn,
            name="audit log",
            timeout_s=timeout_s,
            options=f"-c search_path={AUDIT_SCHEMA} -c lock_timeout={lock_ms}"
            + (" -c default_transaction_read_only=on" if read_only else ""),
            application_name="toolscout-audit",
        )
        self._session.connection()  # an unreachable database fails here, naming it

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        if sql.strip().upper() == "BEGIN IMMEDIATE":
            self._session.run("BEGIN")
            return self._session.run("SELECT pg_advisory_xact_lock(%s)", (_CHAIN_LOCK,))
        return self._session.run(sql.replace("?", "%s") if params else sql, params)

    def close(self) -> None:
        self._session.close()


class PostgresAuditLog(AuditLog):
    """:class:`AuditLog` in PostgreSQL (schema ``toolscout_audit``), shared by replicas."""

    #: every write reads the head under the chain's advisory lock (replicas share the table)
    _one_statement = False

    def __init__(
        self, dsn: str, *, key: str | bytes | None = None, timeout_s: float = 10.0
    ) -> None:
        self.path = redact(dsn)  # type: ignore[assignment]  # named in messages only
        self._key = _key_bytes(key)
        conn = _Connection(dsn, timeout_s)
        self._conn = conn  # type: ignore[assignment]
        try:
            self._set_up(lambda: _create_schema(conn))
        except BaseException:
            conn.close()
            raise

    def verify(self, expected_head: Head | str | None = None) -> Verification:
        """The chain check, and the append-only triggers present (a failure if not)."""
        with self._lock:
            missing = _missing_triggers(self._conn)  # type: ignore[arg-type]
        return _judged(super().verify(expected_head), missing)


def verify_database(
    dsn: str, *, key: str | bytes | None = None, expected_head: Head | str | None = None
) -> Verification:
    """:func:`~toolscout.gateway.audit.verify_file` for a log in PostgreSQL: read-only
    (creates nothing, repairs nothing); a missing table or trigger, a key that does
    not match, a broken chain or one that disagrees with ``expected_head`` fail."""
    raw = _key_bytes(key)
    conn = _Connection(dsn, 10.0, read_only=True)
    where = redact(dsn)
    try:
        tables = {r[0] for r in conn.execute(_TABLES_SQL, (AUDIT_SCHEMA,)).fetchall()}
        if "audit_log" not in tables:
            return Verification(False, None, 0, f"{where} has no {AUDIT_SCHEMA}.audit_log table")
        missing = _missing_triggers(conn)
        stored = None
        if "audit_meta" in tables:
            row = conn.execute("SELECT value FROM audit_meta WHERE key = 'key_id'").fetchone()
            stored = row[0] if row else None
        result = _verify(conn, where, raw, expected_head)  # type: ignore[arg-type]
    finally:
        conn.close()
    return _judged(result, missing, stored, raw)


def _create_schema(conn: _Connection) -> None:
    """The log's tables and triggers, unless the stored schema digest says they are current."""
    if not _schema_current(conn):
        conn.execute(_PG_SCHEMA)
        conn.execute(
            "INSERT INTO audit_meta VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (_SCHEMA_KEY, _SCHEMA_DIGEST),
        )


def _schema_current(conn: _Connection) -> bool:
    """Whether this version's tables and both triggers are in place already.

    Then an open runs no DDL: ``CREATE OR REPLACE TRIGGER`` takes a lock on
    ``audit_log`` that waits for every replica's in-flight append and holds the
    next ones back, so a replica (re)starting would stall the others' calls. A
    missing trigger or an older schema text still runs the statements.
    """
    meta, log = conn.execute(
        "SELECT to_regclass(?), to_regclass(?)", (f"{AUDIT_SCHEMA}.audit_meta", _LOG_TABLE)
    ).fetchone()
    if meta is None or log is None:
        return False
    row = conn.execute("SELECT value FROM audit_meta WHERE key = ?", (_SCHEMA_KEY,)).fetchone()
    return row is not None and row[0] == _SCHEMA_DIGEST and not _missing_triggers(conn)


def _missing_triggers(conn: _Connection) -> list[str]:
    rows = conn.execute(_TRIGGERS_SQL, (_LOG_TABLE,)).fetchall()
    return [t for t in PG_TRIGGERS if t not in {r[0] for r in rows}]


def read_database(
    dsn: str,
    since: float | datetime | None = None,
    subject: str | None = None,
    limit: int | None = None,
) -> list[AuditRecord]:
    """Records of the audit log in PostgreSQL, read in a read-only session."""
    conn = _Connection(dsn, 10.0, read_only=True)
    try:
        if not conn.execute(_TABLES_SQL, (AUDIT_SCHEMA,)).fetchall():
            raise StoreError(f"{redact(dsn)} has no audit log")
        return _read(conn, redact(dsn), since, subject, limit)  # type: ignore[arg-type]
    finally:
        conn.close()


__all__ = [
    "AUDIT_SCHEMA",
    "PostgresAuditLog",
    "read_database",
    "verify_database",
]
