"""Tests for toolscout.gateway.audit and audit_verify: the append-only, keyed, chained log."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pg_fixture import pg_dsn, pg_server  # noqa: F401  (fixtures)
from toolscout.errors import ArgumentError, ConfigError, StoreError
from toolscout.gateway.audit import GENESIS, AuditLog, args_digest, canonical_json
from toolscout.gateway.audit_rows import _row_hash
from toolscout.gateway.audit_verify import Head, verify_file


def entry(**over: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "subject": "alice",
        "tenant": "acme",
        "tool_id": "billing.invoice.get",
        "args_digest": args_digest({"invoice": "in_1"}),
        "decision": "allowed",
        "reason": "ok",
        "latency_ms": 0.4321,
        "status": "ok",
    }
    out.update(over)
    return out


@pytest.fixture
def sqlite_log(tmp_path: Path) -> Iterator[AuditLog]:
    with AuditLog(tmp_path / "toolscout.db") as log:
        yield log


@pytest.fixture(params=["sqlite", "postgres"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AuditLog]:
    """The log's behaviour is the same in a SQLite file and in PostgreSQL."""
    if request.param == "postgres":
        from toolscout.gateway.audit_pg import PostgresAuditLog

        with PostgresAuditLog(request.getfixturevalue("pg_dsn")) as pg:
            yield pg
    else:
        with AuditLog(tmp_path / "toolscout.db") as log:
            yield log


def test_append_read_and_chain(log: AuditLog) -> None:
    a = log.append(**entry())
    b = log.append(**entry(subject="bob", decision="denied", reason="missing_scope"))
    assert (a.id, b.id) == (1, 2)
    assert a.prev_hash == GENESIS and b.prev_hash == a.hash
    assert [r.subject for r in log.read()] == ["alice", "bob"]
    assert log.read(subject="bob")[0].reason == "missing_scope"
    assert log.read(limit=1)[0].id == 2
    assert log.verify()[:3] == (True, None, 2)
    ok, bad, count = log.verify()[:3]
    assert ok and bad is None and count == 2


def test_since_filter(log: AuditLog) -> None:
    log.append(**entry(), ts=time.time() - 3600)
    log.append(**entry(subject="recent"))
    assert [r.subject for r in log.read(since=time.time() - 60)] == ["recent"]


def test_digest_is_canonical_and_args_are_never_stored(
    sqlite_log: AuditLog, tmp_path: Path
) -> None:
    log = sqlite_log
    assert args_digest({"b": 1, "a": [1, "é"]}) == args_digest({"a": [1, "é"], "b": 1})
    assert canonical_json({"b": 1, "a": 2}) == '{"a":2,"b":1}'
    log.append(**entry(args_digest=args_digest({"card_number": "4242424242424242"})))
    raw = (tmp_path / "toolscout.db").read_bytes()
    wal = tmp_path / "toolscout.db-wal"
    raw += wal.read_bytes() if wal.exists() else b""
    assert b"4242424242424242" not in raw


def test_triggers_refuse_update_and_delete(sqlite_log: AuditLog, tmp_path: Path) -> None:
    log = sqlite_log
    log.append(**entry())
    conn = sqlite3.connect(tmp_path / "toolscout.db")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE audit_log SET decision = 'denied'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM audit_log")
    conn.close()


def _tamper(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER audit_log_no_update")
    conn.execute("DROP TRIGGER audit_log_no_delete")
    conn.execute(sql)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("sql", "bad_id"),
    [
        ("UPDATE audit_log SET decision = 'allowed', reason = 'ok' WHERE id = 3", 3),
        ("UPDATE audit_log SET subject = 'mallory' WHERE id = 2", 2),
        ("UPDATE audit_log SET latency_ms = 1.0 WHERE id = 5", 5),
        ("DELETE FROM audit_log WHERE id = 2", 3),
        ("UPDATE audit_log SET hash = 'x' WHERE id = 4", 4),
    ],
)
def test_tampering_is_detected(tmp_path: Path, sql: str, bad_id: int) -> None:
    path = tmp_path / "toolscout.db"
    with AuditLog(path) as log:
        for i in range(6):
            log.append(**entry(subject=f"user{i}", decision="denied", reason="missing_scope"))
        assert log.verify().ok
    _tamper(path, sql)
    with AuditLog(path) as log:
        result = log.verify()
    assert not result.ok
    assert result.first_bad_id == bad_id
    assert result.count in (5, 6)


def test_recomputing_one_hash_still_breaks_the_next_link(tmp_path: Path) -> None:
    path = tmp_path / "toolscout.db"
    with AuditLog(path) as log:
        for _ in range(3):
            log.append(**entry())
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER audit_log_no_update")
    row = conn.execute("SELECT * FROM audit_log WHERE id = 2").fetchone()
    edited = (*row[:6], "allowed", "forged", *row[8:10], row[12], row[13], row[14])
    conn.execute(
        "UPDATE audit_log SET reason = 'forged', hash = ? WHERE id = 2",
        (_row_hash(row[10], edited, None),),
    )
    conn.commit()
    conn.close()
    with AuditLog(path) as log:
        assert log.verify()[:3] == (False, 3, 3)


def test_threads_and_two_connections_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "toolscout.db"
    logs = [AuditLog(path), AuditLog(path)]

    def worker(i: int) -> None:
        for j in range(50):
            logs[i % 2].append(**entry(subject=f"t{i}-{j}"))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert logs[0].verify()[:3] == (True, None, 300)
    assert logs[0].count() == 300
    for log in logs:
        log.close()


def test_caller_text_is_bounded(log: AuditLog) -> None:
    rec = log.append(**entry(tool_id="x" * 10_000))
    assert len(rec.tool_id) == 256
    assert log.verify().ok


def test_bad_decision(log: AuditLog) -> None:
    with pytest.raises(ConfigError):
        log.append(**entry(decision="maybe"))


def test_same_database_as_other_tables(tmp_path: Path) -> None:
    path = tmp_path / "toolscout.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE cards (id TEXT PRIMARY KEY)")
    conn.commit()
    conn.close()
    with AuditLog(path) as log:
        log.append(**entry())
        assert log.verify().ok
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert {"cards", "audit_log"} <= tables


KEY = "k" * 32


# --------------------------------------------------------------------------- sanitising


def test_lone_surrogates_and_control_characters_are_stored_safely(log: AuditLog) -> None:
    rec = log.append(**entry(tool_id="bad\ud800id", subject="sub\udfff\x00\n", tenant="t\ud83d"))
    assert "\ud800" not in rec.tool_id and rec.tool_id == "bad\ufffdid"
    assert "\x00" not in rec.subject and "\\u0000" in rec.subject
    stored = log.read()[-1]
    assert stored.tool_id == rec.tool_id and stored.subject == rec.subject
    assert log.verify().ok


def test_canonical_json_refuses_nan_and_deep_nesting() -> None:
    with pytest.raises(ArgumentError):
        canonical_json({"a": float("nan")})
    deep: Any = 1
    for _ in range(50_000):
        deep = {"a": deep}
    with pytest.raises(ArgumentError):
        canonical_json(deep)


# --------------------------------------------------------------------------- attempt / outcome


def test_begin_then_complete_are_two_chained_rows(log: AuditLog) -> None:
    attempt = log.begin(subject="alice", tenant="acme", tool_id="t", args_digest="d")
    rows = log.read()
    assert rows[-1].kind == "attempt" and rows[-1].status == "started"
    outcome = log.complete(attempt, status="ok", reason="ok", latency_ms=3.2)
    assert outcome.kind == "outcome" and outcome.ref == attempt
    assert outcome.subject == "alice" and outcome.tool_id == "t"
    assert outcome.prev_hash == rows[-1].hash
    timed = log.complete(
        log.begin(subject="a", tenant="", tool_id="t", args_digest="d"),
        status="timeout",
        reason="timed out; may still complete",
        latency_ms=1,
    )
    assert timed.decision == "error"
    assert log.verify().ok
    with pytest.raises(ConfigError):
        log.complete(outcome.id, status="ok", reason="ok", latency_ms=0)


def test_an_attempt_begun_elsewhere_is_completed_from_the_file(tmp_path: Path) -> None:
    """``complete`` chains the outcome from the attempt it remembers; one begun by another
    log object (another process) is read back from the file, with the same fields."""
    path = tmp_path / "audit.db"
    with AuditLog(path) as first, AuditLog(path) as second:
        mine = first.begin(subject="alice", tenant="acme", tool_id="t", args_digest="d1")
        theirs = second.begin(subject="bob", tenant="beta", tool_id="u", args_digest="d2")
        crossed = first.complete(theirs, status="ok", reason="ok", latency_ms=1.0)
        own = first.complete(mine, status="error", reason="tool_failed", latency_ms=2.0)
        assert (crossed.ref, crossed.subject, crossed.tenant, crossed.tool_id) == (
            theirs,
            "bob",
            "beta",
            "u",
        )
        assert crossed.args_digest == "d2"
        assert (own.ref, own.subject, own.tool_id, own.args_digest) == (mine, "alice", "t", "d1")
        assert own.prev_hash == crossed.hash  # one chain, in the order written
        with pytest.raises(ConfigError):  # an outcome is no attempt
            second.complete(own.id, status="ok", reason="ok", latency_ms=0)
        assert first.verify().ok


def test_begin_fails_when_the_database_is_write_locked(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with AuditLog(path) as log:
        log._conn.execute("PRAGMA busy_timeout = 100")
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreError, match="cannot write"):
                log.begin(subject="a", tenant="", tool_id="t", args_digest="d")
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert log.count() == 0


# --------------------------------------------------------------------------- keyed chain


def _fill_keyed(path: Path, n: int = 4, key: str = KEY) -> None:
    with AuditLog(path, key=key) as log:
        for i in range(n):
            log.append(**entry(subject=f"user{i}", args_digest=log.digest({"i": i})))


def test_a_forged_row_appended_with_a_recomputed_sha256_chain_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    _fill_keyed(path)
    conn = sqlite3.connect(path)
    last = conn.execute("SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1").fetchone()
    fields = (last[0] + 1, time.time(), "mallory", "acme", "t", "d", "allowed", "ok", 1.0, "ok")
    forged = _row_hash(last[1], (*fields, "record", 0, ""), None)  # the attacker has no key
    conn.execute(
        "INSERT INTO audit_log VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (*fields, last[1], forged, "record", 0, ""),
    )
    conn.commit()
    conn.close()
    assert verify_file(path).ok is False  # keyed log, no key given
    result = verify_file(path, key=KEY)
    assert not result.ok and result.first_bad_id == 5


def test_a_keyed_log_needs_its_key(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    _fill_keyed(path)
    assert verify_file(path, key=KEY).ok
    wrong = verify_file(path, key="w" * 32)
    assert not wrong.ok and "not this log's key" in wrong.problem
    with pytest.raises(ConfigError, match="key"):
        AuditLog(path)
    with pytest.raises(ConfigError, match="does not match"):
        AuditLog(path, key="w" * 32)
    with pytest.raises(ConfigError, match="16 bytes"):
        AuditLog(tmp_path / "other.db", key="short")


def test_argument_digest_is_keyed(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "a.db", key=KEY) as log:
        keyed = log.digest({"pin": "1234"})
    assert keyed != args_digest({"pin": "1234"})
    assert keyed == args_digest({"pin": "1234"}, KEY)
    assert keyed != args_digest({"pin": "1234"}, "x" * 32)


# ------------------------------------------------------------- head and read-only verify


def test_head_catches_truncation(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    _fill_keyed(path, 5)
    with AuditLog(path, key=KEY) as log:
        head = log.head()
        assert head.count == 5 and head == Head.parse(str(head))
        log.append(**entry())  # the log may grow after the export
    assert verify_file(path, key=KEY, expected_head=head).ok
    assert verify_file(path, key=KEY, expected_head=str(head)).ok
    _tamper(path, "DELETE FROM audit_log WHERE id >= 5")
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log "
        "BEGIN SELECT RAISE(ABORT, 'x'); END;"
        "CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log "
        "BEGIN SELECT RAISE(ABORT, 'x'); END;"
    )
    conn.close()
    assert verify_file(path, key=KEY).ok  # a valid shorter chain...
    result = verify_file(path, key=KEY, expected_head=head)
    assert not result.ok and "removed" in result.problem  # ...but not the exported one
    with pytest.raises(ConfigError):
        Head.parse("5:nothex")


def test_verify_file_is_read_only_and_reports_dropped_triggers(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    _fill_keyed(path)
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER audit_log_no_delete")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    result = verify_file(path, key=KEY)
    assert not result.ok and "audit_log_no_delete" in result.problem
    assert path.read_bytes() == before
    names = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master")}
    assert "audit_log_no_delete" not in names  # the evidence is not repaired


@pytest.mark.parametrize("how", ["truncate", "drop", "delete", "missing"])
def test_an_erased_log_is_a_failure(tmp_path: Path, how: str) -> None:
    path = tmp_path / "audit.db"
    _fill_keyed(path)
    with AuditLog(path, key=KEY) as log:
        head = log.head()
    if how == "truncate":
        path.write_bytes(b"")
    elif how == "drop":
        _tamper(path, "DROP TABLE audit_log")
    elif how == "delete":
        _tamper(path, "DELETE FROM audit_log")
    else:
        path.unlink()
    result = verify_file(path, key=KEY, expected_head=head)
    assert not result.ok and result.problem
    if how == "delete":
        assert result.count == 0


def test_an_empty_log_with_an_empty_head_is_intact(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with AuditLog(path, key=KEY) as log:
        head = log.head()
    assert head == (0, GENESIS)
    assert verify_file(path, key=KEY, expected_head=head).ok
    assert not verify_file(path, key=KEY, expected_head=Head(1, "a" * 64)).ok


def test_a_log_from_before_attempt_rows_is_migrated_and_verifies(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE audit_log (id INTEGER PRIMARY KEY, ts REAL NOT NULL, subject TEXT NOT NULL,"
        " tenant TEXT NOT NULL, tool_id TEXT NOT NULL, args_digest TEXT NOT NULL,"
        " decision TEXT NOT NULL, reason TEXT NOT NULL, latency_ms REAL NOT NULL,"
        " status TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL);"
        "CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log "
        "BEGIN SELECT RAISE(ABORT, 'x'); END;"
        "CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log "
        "BEGIN SELECT RAISE(ABORT, 'x'); END;"
    )
    fields = (1, 1.0, "a", "t", "tool", "d", "allowed", "ok", 1.0, "ok")
    old_hash = _row_hash(GENESIS, (*fields, "record", 0, ""), None)
    conn.execute(
        "INSERT INTO audit_log VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", (*fields, GENESIS, old_hash)
    )
    conn.commit()
    conn.close()
    assert verify_file(path).ok
    with AuditLog(path) as log:
        log.begin(subject="b", tenant="t", tool_id="tool", args_digest="d")
        assert log.verify().ok and log.count() == 2


def test_a_garbage_file_fails_verification(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    path.write_bytes(b"\x00garbage" * 100)
    result = verify_file(path)
    assert not result.ok and "not a readable database" in result.problem


def test_detail_is_stored_chained_and_bounded(log: AuditLog) -> None:
    attempt = log.begin(subject="a", tenant="t", tool_id="db.query", args_digest="d")
    rec = log.complete(
        attempt, status="error", reason="tool_failed", latency_ms=1, detail="boom\ud800" * 500
    )
    assert rec.detail.startswith("boom\ufffd") and len(rec.detail) == 1000
    assert log.read()[-1].detail == rec.detail
    assert log.verify().ok
    refused = log.append(**entry(decision="denied", reason="x"), detail="why")
    assert refused.detail == "why" and log.verify().ok


def test_an_unkeyed_log_salts_argument_digests(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "a.db") as a, AuditLog(tmp_path / "b.db") as b:
        assert a.digest({"pin": "1234"}) != args_digest({"pin": "1234"})  # no rainbow table
        assert a.digest({"pin": "1234"}) != b.digest({"pin": "1234"})  # per log
        first = a.digest({"pin": "1234"})
    with AuditLog(tmp_path / "a.db") as again:
        assert again.digest({"pin": "1234"}) == first  # stable across reopenings


def test_the_read_only_side_is_still_importable_from_audit() -> None:
    from toolscout.gateway import audit, audit_verify

    assert audit.verify_file is audit_verify.verify_file and audit.Head is audit_verify.Head
    with pytest.raises(AttributeError):
        audit.no_such_name  # noqa: B018


def test_an_empty_unkeyed_log_takes_a_key_and_a_written_one_says_so(tmp_path: Path) -> None:
    """A command that opened the log without a key (an import) left an empty file: a
    server given a key keys it (it refused: "keyed and the key given does not match")."""
    path = tmp_path / "fresh.audit.db"
    AuditLog(path).close()
    with AuditLog(path, key=KEY) as log:
        assert log.keyed
        log.append(subject="a", tenant="t", tool_id="x", args_digest=log.digest({}),
                   decision="allowed", reason="ok", latency_ms=1, status="ok")  # fmt: skip
    assert verify_file(path, key=KEY).ok
    unkeyed = tmp_path / "unkeyed.audit.db"
    with AuditLog(unkeyed) as log:
        log.append(subject="a", tenant="t", tool_id="x", args_digest=log.digest({}),
                   decision="allowed", reason="ok", latency_ms=1, status="ok")  # fmt: skip
    with pytest.raises(ConfigError, match="was written without a key"):
        AuditLog(unkeyed, key=KEY)


def test_a_call_after_this_connections_own_row_is_one_statement_per_row(tmp_path: Path) -> None:
    """After a row of its own, a connection appends with one autocommitted ``INSERT`` (the
    attempt is committed when ``begin`` returns); when another writer appended meanwhile the
    insert's id collides and the head is read under the lock: one chain either way."""
    path = tmp_path / "audit.db"
    with AuditLog(path) as first, AuditLog(path) as second:
        first.append(**entry())  # the first row: the head is read under BEGIN IMMEDIATE
        seen: list[str] = []
        first._conn.set_trace_callback(seen.append)
        attempt = first.begin(subject="alice", tenant="acme", tool_id="t", args_digest="d")
        assert [s.split()[0] for s in seen] == ["INSERT"]
        # committed at once: another connection reads the attempt before the tool runs
        reader = sqlite3.connect(path)
        assert reader.execute("SELECT status FROM audit_log WHERE id = ?", (attempt,)).fetchone()
        reader.close()
        other = second.append(**entry(subject="bob"))  # another writer takes the next id
        seen.clear()
        outcome = first.complete(attempt, status="ok", reason="ok", latency_ms=1.0)
        assert [s.split()[0] for s in seen] == ["INSERT", "BEGIN", "SELECT", "INSERT", "COMMIT"]
        assert outcome.id == other.id + 1 and outcome.prev_hash == other.hash
        seen.clear()
        last = first.append(**entry(subject="carol"))
        assert [s.split()[0] for s in seen] == ["INSERT"] and last.prev_hash == outcome.hash
        crossed = second.append(**entry(subject="dave"))  # its head was stale: read again
        assert crossed.id == last.id + 1 and crossed.prev_hash == last.hash
        assert first.verify().ok
        assert [r.subject for r in first.read()] == [
            "alice", "alice", "bob", "alice", "carol", "dave"
        ]  # fmt: skip
