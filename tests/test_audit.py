"""Tests for toolscout.gateway.audit: the append-only, hash-chained audit log."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from toolscout.errors import ConfigError
from toolscout.gateway.audit import GENESIS, AuditLog, args_digest, canonical_json


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
def log(tmp_path: Path) -> AuditLog:
    with AuditLog(tmp_path / "toolscout.db") as log:
        yield log  # type: ignore[misc]


def test_append_read_and_chain(log: AuditLog) -> None:
    a = log.append(**entry())
    b = log.append(**entry(subject="bob", decision="denied", reason="missing_scope"))
    assert (a.id, b.id) == (1, 2)
    assert a.prev_hash == GENESIS and b.prev_hash == a.hash
    assert [r.subject for r in log.read()] == ["alice", "bob"]
    assert log.read(subject="bob")[0].reason == "missing_scope"
    assert log.read(limit=1)[0].id == 2
    assert log.verify() == (True, None, 2)
    ok, bad, count = log.verify()
    assert ok and bad is None and count == 2


def test_since_filter(log: AuditLog) -> None:
    log.append(**entry(), ts=time.time() - 3600)
    log.append(**entry(subject="recent"))
    assert [r.subject for r in log.read(since=time.time() - 60)] == ["recent"]


def test_digest_is_canonical_and_args_are_never_stored(log: AuditLog, tmp_path: Path) -> None:
    assert args_digest({"b": 1, "a": [1, "é"]}) == args_digest({"a": [1, "é"], "b": 1})
    assert canonical_json({"b": 1, "a": 2}) == '{"a":2,"b":1}'
    log.append(**entry(args_digest=args_digest({"card_number": "4242424242424242"})))
    raw = (tmp_path / "toolscout.db").read_bytes()
    wal = tmp_path / "toolscout.db-wal"
    raw += wal.read_bytes() if wal.exists() else b""
    assert b"4242424242424242" not in raw


def test_triggers_refuse_update_and_delete(log: AuditLog, tmp_path: Path) -> None:
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
    from toolscout.gateway.audit import _row_hash

    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER audit_log_no_update")
    row = conn.execute("SELECT * FROM audit_log WHERE id = 2").fetchone()
    edited = (*row[:6], "allowed", "forged", *row[8:10])
    conn.execute(
        "UPDATE audit_log SET reason = 'forged', hash = ? WHERE id = 2",
        (_row_hash(row[10], edited),),
    )
    conn.commit()
    conn.close()
    with AuditLog(path) as log:
        assert log.verify() == (False, 3, 3)


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
    assert logs[0].verify() == (True, None, 300)
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
