"""Reading and verifying an audit log file without writing to it.

:func:`verify_file` is what ``toolscout audit --verify`` runs: it opens the file
read-only (never re-creating a dropped trigger, never repairing evidence) and
reports as failures a missing or empty file, a file that is not a database, a
missing table, missing append-only triggers, a key that does not match, a chain
that breaks, and a log that disagrees with an exported :class:`Head`.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from toolscout.errors import ConfigError, StoreError
from toolscout.gateway.audit_rows import (
    _COLUMNS,
    GENESIS,
    TRIGGERS,
    AuditRecord,
    _key_bytes,
    _key_id,
    _migrate,
    _read,
    _row_hash,
)

__all__ = ["Head", "Verification", "read_file", "verify_file"]


class Head(NamedTuple):
    """The log's head: how many rows, and the last row's hash. Export it as ``str(head)``."""

    count: int  # type: ignore[assignment]  # shadows tuple.count on purpose
    hash: str

    def __str__(self) -> str:
        return f"{self.count}:{self.hash}"

    @classmethod
    def parse(cls, text: str) -> Head:
        """``"count:hash"`` as :meth:`__str__` writes it."""
        count, sep, digest = text.strip().partition(":")
        if (
            not sep
            or not count.isdigit()
            or len(digest) != 64
            or any(c not in "0123456789abcdef" for c in digest)
        ):
            raise ConfigError(f"not an audit head: {text!r} (expected COUNT:SHA256HEX)")
        return cls(int(count), digest)


class Verification(NamedTuple):
    """The result of a verification: ``(ok, first_bad_id, count)`` plus what was wrong."""

    ok: bool
    first_bad_id: int | None
    count: int  # type: ignore[assignment]  # shadows tuple.count on purpose
    #: why it failed, in one line ("" when ok)
    problem: str = ""
    #: the head that was verified
    head: str = f"0:{GENESIS}"
    #: whether the chain was checked with a key; an unkeyed chain that holds proves
    #: nothing against someone who can write the file (they can recompute it)
    keyed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self._asdict())


def _head(conn: sqlite3.Connection, path: Path) -> Head:
    try:
        row = conn.execute("SELECT COUNT(*), MAX(id) FROM audit_log").fetchone()
        last = conn.execute("SELECT hash FROM audit_log ORDER BY id DESC LIMIT 1").fetchone()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the audit log at {path}: {exc}") from None
    return Head(int(row[0]), last[0] if last else GENESIS)


def _rows(conn: sqlite3.Connection) -> Iterator[tuple[Any, ...]]:
    cursor = conn.execute(f"SELECT {_COLUMNS} FROM audit_log ORDER BY id")
    while batch := cursor.fetchmany(1000):
        yield from batch


def _verify(
    conn: sqlite3.Connection,
    path: Path,
    key: bytes | None,
    expected_head: Head | str | None,
) -> Verification:
    """The chain's verdict, saying whether it was checked with a key."""
    return _chain(conn, path, key, expected_head)._replace(keyed=key is not None)


def _chain(
    conn: sqlite3.Connection,
    path: Path,
    key: bytes | None,
    expected_head: Head | str | None,
) -> Verification:
    expected = Head.parse(expected_head) if isinstance(expected_head, str) else expected_head
    prev_hash = GENESIS
    count = 0
    first_bad: int | None = None
    at_expected: str | None = GENESIS if expected is not None and expected.count == 0 else None
    try:
        for row in _rows(conn):
            count += 1
            fields = (*row[:10], row[12], row[13], row[14])
            intact = (
                row[0] == count
                and row[10] == prev_hash
                and _row_hash(prev_hash, fields, key) == row[11]
            )
            if not intact and first_bad is None:
                first_bad = int(row[0])
            prev_hash = row[11]
            if expected is not None and count == expected.count:
                at_expected = prev_hash
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the audit log at {path}: {exc}") from None
    head = str(Head(count, prev_hash))
    if first_bad is not None:
        return Verification(False, first_bad, count, f"chain breaks at record {first_bad}", head)
    if expected is not None:
        if count < expected.count:
            return Verification(
                False,
                count + 1,
                count,
                f"{count} records, but the exported head has {expected.count}: "
                "records were removed",
                head,
            )
        if at_expected != expected.hash:
            return Verification(
                False,
                expected.count or None,
                count,
                f"record {expected.count} does not match the exported head",
                head,
            )
    return Verification(True, None, count, "", head)


def verify_file(
    path: str | Path,
    *,
    key: str | bytes | None = None,
    expected_head: Head | str | None = None,
) -> Verification:
    """Verify the audit log in ``path`` without writing anything to it.

    Opens the file read-only; a missing or empty file, a missing table, missing
    append-only triggers or a key that does not match are failures, as is a
    chain that breaks or disagrees with ``expected_head``.
    """
    raw = _key_bytes(key)
    path = Path(path)
    expected = Head.parse(expected_head) if isinstance(expected_head, str) else expected_head
    if not path.is_file():
        return Verification(False, None, 0, f"no audit log at {path}")
    if path.stat().st_size == 0:
        return Verification(False, None, 0, f"{path} is empty: the audit log was erased")
    try:
        conn = _ro_connect(path)
    except sqlite3.Error as exc:
        return Verification(False, None, 0, f"{path} is not a readable database: {exc}")
    try:
        try:
            names = {(r[0], r[1]) for r in conn.execute("SELECT type, name FROM sqlite_master")}
        except sqlite3.DatabaseError as exc:
            return Verification(False, None, 0, f"{path} is not a readable database: {exc}")
        if ("table", "audit_log") not in names:
            return Verification(False, None, 0, f"{path} has no audit_log table")
        missing = [t for t in TRIGGERS if ("trigger", t) not in names]
        cols = {r[1] for r in conn.execute("PRAGMA table_info(audit_log)")}
        if not {"kind", "ref", "detail"} <= cols:
            conn.close()
            return _verify_legacy(path, raw, expected)
        stored_key_id = None
        if ("table", "audit_meta") in names:
            row = conn.execute("SELECT value FROM audit_meta WHERE key = 'key_id'").fetchone()
            stored_key_id = row[0] if row else None
        result = _verify(conn, path, raw, expected)
    finally:
        conn.close()
    return _judged(result, missing, stored_key_id, raw)


def _judged(
    result: Verification,
    missing_triggers: Sequence[str],
    stored_key_id: str | None = None,
    key: bytes | None = None,
) -> Verification:
    """The chain's verdict, failed first when the log is keyed by another key than
    ``key``, then (when the chain holds) when append-only triggers are missing."""
    if stored_key_id is not None and stored_key_id != _key_id(key):
        why = "no key was given" if key is None else "the key given is not this log's key"
        return result._replace(ok=False, problem=f"the audit log is keyed and {why}")
    if result.ok and missing_triggers:
        return result._replace(
            ok=False, problem=f"append-only trigger(s) missing: {', '.join(missing_triggers)}"
        )
    return result


def read_file(
    path: str | Path,
    since: float | datetime | None = None,
    subject: str | None = None,
    limit: int | None = None,
) -> list[AuditRecord]:
    """Records of the audit log in ``path``, read without writing (a read-only file is fine)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        raise StoreError(f"no audit log at {path}")
    try:
        conn = _ro_connect(path)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the audit log at {path}: {exc}") from None
    try:
        try:
            cols = {r[1] for r in conn.execute("PRAGMA table_info(audit_log)")}
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path} is not a readable database: {exc}") from None
        if not cols:
            raise StoreError(f"{path} has no audit log")
        if not {"kind", "ref", "detail"} <= cols:
            mem = sqlite3.connect(":memory:", isolation_level=None)
            conn.backup(mem)
            conn.close()
            conn = mem
            _migrate(conn)
        return _read(conn, path, since, subject, limit)
    finally:
        conn.close()


def _verify_legacy(path: Path, key: bytes | None, expected: Head | None) -> Verification:
    """A log written before attempt/outcome rows: verify an in-memory copy."""
    src = _ro_connect(path)
    mem = sqlite3.connect(":memory:", isolation_level=None)
    try:
        src.backup(mem)
        _migrate(mem)
        names = {r[0] for r in mem.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
        result = _verify(mem, path, key, expected)
    finally:
        src.close()
        mem.close()
    return _judged(result, [t for t in TRIGGERS if t not in names])


def _ro_uri(path: Path, immutable: bool = False) -> str:
    """A read-only SQLite URI for ``path``."""
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
    return uri + "&immutable=1" if immutable else uri


def _ro_connect(path: Path) -> sqlite3.Connection:
    """A read-only connection; ``immutable`` when a WAL file's index cannot be created."""
    try:
        conn = sqlite3.connect(_ro_uri(path), uri=True, isolation_level=None)
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        return sqlite3.connect(_ro_uri(path, immutable=True), uri=True, isolation_level=None)
