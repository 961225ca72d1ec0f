"""The audit log in PostgreSQL: one chain for every replica, append-only, verified.

The behaviour it shares with the SQLite log runs in ``test_audit.py`` on both."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
from typing import Any

import psycopg
import pytest

from fork_kit import toolscout as fork_toolscout
from pg_fixture import pg_dsn, pg_server  # noqa: F401  (fixtures)
from support import embedder
from test_audit import entry
from toolscout import DryRunExecutor, Settings, Toolscout
from toolscout.cards import make_spec
from toolscout.errors import ConfigError, StoreError
from toolscout.gateway.audit_pg import AUDIT_SCHEMA, PostgresAuditLog, redact

KEY = "an-audit-key-0123456789"


def _raw(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


def _append_many(dsn: str, who: str, n: int) -> None:
    with PostgresAuditLog(dsn, key=KEY) as log:
        for i in range(n):
            attempt = log.begin(subject=f"{who}-{i}", tenant="acme", tool_id="t", args_digest="d")
            log.complete(attempt, status="ok", reason="ok", latency_ms=1.5)


def test_two_processes_and_threads_append_to_one_chain(pg_dsn: str) -> None:  # noqa: F811
    """Replicas interleave their appends; no two rows chain to the same predecessor."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(pg_dsn, f"p{i}", 40)) for i in range(2)]
    for p in procs:
        p.start()
    log = PostgresAuditLog(pg_dsn, key=KEY)
    threads = [
        threading.Thread(target=lambda i=i: [log.append(**entry(subject=f"th{i}-{j}"))
                                             for j in range(20)])
        for i in range(3)
    ]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    result = log.verify()
    assert result.ok and result.count == 2 * 40 * 2 + 3 * 20, result
    rows = log.read()
    assert [r.id for r in rows] == list(range(1, result.count + 1))
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(rows))
    log.close()


def test_update_delete_and_truncate_are_refused(pg_dsn: str) -> None:  # noqa: F811
    with PostgresAuditLog(pg_dsn) as log:
        log.append(**entry())
    with _raw(pg_dsn) as conn:
        for sql in ("UPDATE {s}.audit_log SET decision = 'denied'", "DELETE FROM {s}.audit_log",
                    "TRUNCATE {s}.audit_log"):  # fmt: skip
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(sql.format(s=AUDIT_SCHEMA))
        assert conn.execute(f"SELECT count(*) FROM {AUDIT_SCHEMA}.audit_log").fetchone() == (1,)


def test_tampering_breaks_the_chain(pg_dsn: str) -> None:  # noqa: F811
    with PostgresAuditLog(pg_dsn, key=KEY) as log:
        for i in range(4):
            log.append(**entry(subject=f"s{i}"))
        head = str(log.head())
        assert log.verify(head).ok
        with _raw(pg_dsn) as conn:  # the database owner can switch the triggers off
            conn.execute(f"ALTER TABLE {AUDIT_SCHEMA}.audit_log DISABLE TRIGGER USER")
            conn.execute(f"UPDATE {AUDIT_SCHEMA}.audit_log SET subject = 'mallory' WHERE id = 3")
            conn.execute(f"ALTER TABLE {AUDIT_SCHEMA}.audit_log ENABLE TRIGGER USER")
        result = log.verify(head)
        assert not result.ok and result.first_bad_id == 3


def test_a_dropped_trigger_is_a_failure_until_the_log_is_opened_again(
    pg_dsn: str,  # noqa: F811
) -> None:
    with PostgresAuditLog(pg_dsn, key=KEY) as log:
        log.append(**entry())
        with _raw(pg_dsn) as conn:
            conn.execute(f"DROP TRIGGER audit_log_no_truncate ON {AUDIT_SCHEMA}.audit_log")
        result = log.verify()
        assert not result.ok and "audit_log_no_truncate" in result.problem
    with PostgresAuditLog(pg_dsn, key=KEY) as log:  # opening re-creates it, like the tables
        assert log.verify().ok


def test_the_key_is_checked_on_open(pg_dsn: str) -> None:  # noqa: F811
    PostgresAuditLog(pg_dsn, key=KEY).close()
    with pytest.raises(ConfigError, match="does not match"):
        PostgresAuditLog(pg_dsn, key="another-key-0123456789")
    with pytest.raises(ConfigError, match="is missing"):
        PostgresAuditLog(pg_dsn)


def test_an_unreachable_database_is_one_error_without_the_password(
    pg_dsn: str,  # noqa: F811
) -> None:
    bad = pg_dsn.replace("postgres@", "postgres:s3cret@").rsplit(":", 1)[0] + ":1/none"
    with pytest.raises(StoreError, match="cannot open the audit log in") as info:
        PostgresAuditLog(bad, timeout_s=2)
    assert "s3cret" not in str(info.value)
    assert redact("postgresql://u:pw@h:5/db") == "postgresql://u@h:5/db"


def test_a_postgres_service_audits_into_its_database(pg_dsn: str) -> None:  # noqa: F811
    """No audit file to configure per replica: the catalog's database holds the chain."""
    from toolscout.policy import Principal

    settings = Settings(db=pg_dsn, audit_key=KEY, log=False)
    with Toolscout.open(settings, embedder=embedder(), executors=DryRunExecutor()) as ts:
        assert isinstance(ts.audit, PostgresAuditLog)
        ts.add([make_spec({"id": "ops.ping", "summary": "Ping a host.", "scopes": ["ops:read"]})])
        assert ts.execute(Principal.of("olga", "acme", scopes=["ops:read"]), "ops.ping", {}).ok
        assert not ts.execute(Principal.of("eve", "acme"), "ops.ping", {}).ok
    with PostgresAuditLog(pg_dsn, key=KEY) as log:
        rows = log.read(outcomes=True)
        calls = [(r.subject, r.decision, r.status) for r in rows if r.kind != "admin"]
        assert calls == [("olga", "allowed", "ok"), ("eve", "denied", "refused")]
        # the import that made the tool is in the same chain, as the local operator's
        admin = [(r.tool_id, r.status) for r in rows if r.kind == "admin"]
        assert admin == [("ops.ping", "started"), ("catalog", "applied")]
        assert log.verify().ok


def test_the_cli_reads_and_verifies_the_log_in_the_database(pg_dsn: str) -> None:  # noqa: F811
    """`toolscout audit --db DSN` reads and verifies in a read-only session."""
    import json
    import subprocess

    with PostgresAuditLog(pg_dsn, key=KEY) as log:
        log.append(**entry(subject="alice"))
        log.append(**entry(subject="bob", decision="denied", reason="missing_scope"))
        head = str(log.head())

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "TOOLSCOUT_AUDIT_KEY": KEY}
        cmd = fork_toolscout("audit", *args)  # forked with the imports done (fork_kit)
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)

    shown = cli("--db", pg_dsn, "--json")
    assert shown.returncode == 0, shown.stderr
    assert [json.loads(line)["subject"] for line in shown.stdout.splitlines()] == ["alice", "bob"]
    ok = cli("--audit-db", pg_dsn, "--verify", "--expect-head", head)
    assert ok.returncode == 0 and "intact: 2 records" in ok.stdout, ok.stdout + ok.stderr
    assert cli("--db", pg_dsn, "--head").stdout.strip() == head
    with _raw(pg_dsn) as conn:
        conn.execute(f"DROP TRIGGER audit_log_append_only ON {AUDIT_SCHEMA}.audit_log")
    broken = cli("--db", pg_dsn, "--verify")
    assert broken.returncode == 1 and "audit_log_append_only" in broken.stdout
    with _raw(pg_dsn) as conn:  # the read-only check re-created nothing
        n = conn.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgname = 'audit_log_append_only'"
        ).fetchone()
        assert n == (0,)
    empty = cli("--db", pg_dsn.rsplit("/", 1)[0] + "/postgres", "--verify")
    assert empty.returncode == 1 and "has no toolscout_audit.audit_log table" in empty.stdout


def test_a_connection_the_server_dropped_is_opened_again(pg_dsn: str) -> None:  # noqa: F811
    """A replica's audit outlives a dropped connection (a restart, a proxy's time-out):
    the next append opens a new one and the chain goes on unbroken."""
    with PostgresAuditLog(pg_dsn, key=KEY) as log:
        log.append(**entry(subject="before"))
        with _raw(pg_dsn) as conn:
            (killed,) = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = 'toolscout-audit'"
            ).fetchone()
        assert killed == 1
        log.append(**entry(subject="after"))
        assert [r.subject for r in log.read()] == ["before", "after"]
        assert log.verify().ok


def test_a_replica_opening_does_not_wait_for_an_append_in_flight(pg_dsn: str) -> None:  # noqa: F811
    """The second open runs no DDL: re-creating the triggers would take a lock on
    ``audit_log`` that waits for (and then blocks) other replicas' appends."""
    PostgresAuditLog(pg_dsn, key=KEY).close()  # the schema, created once
    with _raw(pg_dsn) as other:
        other.execute("BEGIN")
        other.execute(f"LOCK TABLE {AUDIT_SCHEMA}.audit_log IN ROW EXCLUSIVE MODE")  # an append's
        log = PostgresAuditLog(pg_dsn, key=KEY, timeout_s=1.0)
        other.execute("ROLLBACK")
    try:
        assert log.verify().ok
    finally:
        log.close()


def test_a_dropped_trigger_is_put_back_on_open(pg_dsn: str) -> None:  # noqa: F811
    PostgresAuditLog(pg_dsn, key=KEY).close()
    with _raw(pg_dsn) as raw:
        raw.execute(f"DROP TRIGGER audit_log_no_truncate ON {AUDIT_SCHEMA}.audit_log")
    with PostgresAuditLog(pg_dsn, key=KEY) as log:
        assert log.verify().ok
