"""The audit log's rows: their table, the canonical forms they hold, their chained hashes.

What :class:`~toolscout.gateway.audit.AuditLog` writes and
:mod:`~toolscout.gateway.audit_verify` and :mod:`~toolscout.gateway.audit_pg` read: the
SQLite schema and its migration, :func:`canonical_json` and the keyed
:func:`args_digest` of a call's arguments, :func:`clean_text` for caller-controlled text,
:class:`AuditRecord` (one stored row) and the hash that chains each row to the one before.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import sqlite3
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from toolscout.errors import ConfigError, StoreError
from toolscout.schemas import check_arguments

__all__ = [
    "DECISIONS",
    "GENESIS",
    "KINDS",
    "MAX_DETAIL",
    "MAX_FIELD",
    "STARTED",
    "TRIGGERS",
    "AuditRecord",
    "args_digest",
    "canonical_json",
    "clean_text",
]

GENESIS = "0" * 64
DECISIONS = ("allowed", "denied", "error")
#: row kinds: a one-row refusal, or the attempt/outcome pair of a call that ran
KINDS = ("record", "attempt", "outcome", "admin")
STARTED = "started"
TRIGGERS = ("audit_log_no_update", "audit_log_no_delete")

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
    hash        TEXT    NOT NULL,
    kind        TEXT    NOT NULL DEFAULT 'record',
    ref         INTEGER NOT NULL DEFAULT 0,
    detail      TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS audit_log_ts ON audit_log (ts);
CREATE TABLE IF NOT EXISTS audit_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
"""

_COLUMNS = (
    "id, ts, subject, tenant, tool_id, args_digest, decision, reason, latency_ms, status, "
    "prev_hash, hash, kind, ref, detail"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_MARKS = ",".join("?" * 15)
_INSERT = f"INSERT INTO audit_log ({_COLUMNS}) VALUES ({_MARKS})"
#: longest stored text field; anything the caller controls is cut to this
MAX_FIELD = 256
#: longest stored detail (exception text, upstream body)
MAX_DETAIL = 1000
_KEY_ID_LABEL = b"toolscout audit key id v1"


def canonical_json(value: Any, *, checked: bool = False) -> str:
    """Key-sorted, compact, UTF-8 JSON: the form digests and size limits are taken over.

    Non-finite numbers and nesting deeper than :data:`toolscout.schemas.MAX_DEPTH`
    are refused first (:class:`~toolscout.errors.ArgumentError`), so neither
    ``NaN`` nor a ``RecursionError`` can come out of here (``checked``: the caller
    already ran :func:`~toolscout.schemas.check_arguments` on ``value``).
    """
    if not checked:
        check_arguments(value)
    return _CANONICAL(value)


#: ``json.dumps`` with these options builds an encoder per call; these are built once
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
_ROW_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _key_bytes(key: str | bytes | None) -> bytes | None:
    if key is None:
        return None
    raw = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    if len(raw) < 16:
        raise ConfigError("the audit key must be at least 16 bytes")
    return raw


def args_digest(arguments: Mapping[str, Any] | str, key: str | bytes | None = None) -> str:
    """Digest of the arguments' canonical JSON (or of an already canonical string).

    With a key it is ``HMAC-SHA256(key, json)``: equal arguments still give equal
    digests (so a record can be matched to a known call), but nobody without the
    key can test guesses (a card number, a short PIN) against a stored digest.
    """
    text = arguments if isinstance(arguments, str) else canonical_json(arguments)
    data = text.encode("utf-8", "surrogatepass")
    raw = _key_bytes(key)
    if raw is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(raw, b"args\x00" + data, hashlib.sha256).hexdigest()


def clean_text(text: object, limit: int = MAX_FIELD) -> str:
    """Caller-controlled text made safe to store: valid UTF-8, no control characters, cut."""
    if not isinstance(text, str):
        text = repr(text)
    elif len(text) <= limit and text.isascii() and text.isprintable():
        return text  # what the steps below leave unchanged (ids, subjects, digests)
    text = _SURROGATE.sub("\ufffd", text)  # a lone surrogate: one replacement character
    if not text.isprintable():
        text = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One audit row as stored."""

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
    #: ``record`` (a refusal), ``attempt`` (before the executor) or ``outcome``
    kind: str = "record"
    #: for an outcome, the id of its attempt
    ref: int = 0
    #: what went wrong inside (exception text, upstream body): never shown to the caller
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def when(self) -> datetime:
        return datetime.fromtimestamp(self.ts).astimezone()


def _row_hash(prev_hash: str, row: tuple[Any, ...], key: bytes | None) -> str:
    """Hash of one row: ``row`` is (id, ts, ..., status, kind, ref, detail) without the hashes.

    A ``record`` row with ``ref`` 0 and no detail hashes the first ten fields only, as logs
    written before attempt/outcome rows existed did.
    """
    legacy = row[10] == "record" and row[11] == 0 and row[12] == ""
    # a tuple is the JSON array a list is (the same bytes, no copy to a list first)
    data = (prev_hash + _ROW_JSON(row[:10] if legacy else row)).encode("utf-8", "surrogatepass")
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def _key_id(key: bytes | None) -> str:
    return "" if key is None else hmac.new(key, _KEY_ID_LABEL, hashlib.sha256).hexdigest()[:16]


def _migrate(conn: sqlite3.Connection) -> None:
    """Add the kind/ref/detail columns to a log written before they existed."""
    cols = {r[1] for r in conn.execute("PRAGMA table_info(audit_log)")}
    if "kind" not in cols:
        conn.execute("ALTER TABLE audit_log ADD COLUMN kind TEXT NOT NULL DEFAULT 'record'")
    if "ref" not in cols:
        conn.execute("ALTER TABLE audit_log ADD COLUMN ref INTEGER NOT NULL DEFAULT 0")
    if "detail" not in cols:
        conn.execute("ALTER TABLE audit_log ADD COLUMN detail TEXT NOT NULL DEFAULT ''")
    conn.execute("CREATE INDEX IF NOT EXISTS audit_log_ref ON audit_log (ref)")


def _statements() -> list[str]:
    """The schema's statements, one by one (``executescript`` would commit)."""
    out: list[str] = []
    buf: list[str] = []
    for line in _SCHEMA.strip().splitlines():
        buf.append(line)
        text = "\n".join(buf)
        if text.rstrip().endswith(";") and sqlite3.complete_statement(text):
            out.append(text)
            buf = []
    return out


def _read(
    conn: sqlite3.Connection,
    path: Path,
    since: float | datetime | None,
    subject: str | None,
    limit: int | None,
    outcomes: bool = False,
) -> list[AuditRecord]:
    where: list[str] = []
    if outcomes:
        where.append(
            "NOT (kind = 'attempt' AND id IN (SELECT ref FROM audit_log WHERE kind = 'outcome'))"
        )
    params: list[Any] = []
    if since is not None:
        where.append("ts >= ?")
        params.append(since.timestamp() if isinstance(since, datetime) else float(since))
    if subject is not None:
        where.append("subject = ?")
        params.append(clean_text(subject))
    sql = f"SELECT {_COLUMNS} FROM audit_log"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    try:
        rows = conn.execute(sql, params).fetchall()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the audit log at {path}: {exc}") from None
    return [AuditRecord(*r) for r in reversed(rows)]
