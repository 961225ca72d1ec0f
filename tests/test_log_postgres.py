"""The discovery log in PostgreSQL: one log for every replica on one database.

The log's behaviour is tested over both backends in ``test_telemetry.py``; here
is what only a shared database has: one hash key, discoveries made through one
process known to another, concurrent first opens, a lost connection, a bad DSN."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pg_fixture import PostgresServer, pg_dsn, pg_server  # noqa: F401  (fixtures)
from support import embedder, spec
from toolscout import DryRunExecutor, Principal, Settings, Toolscout
from toolscout.errors import StoreError, UnknownDiscoveryError
from toolscout.stores.dsn import redact
from toolscout.telemetry.log import open_log
from toolscout.telemetry.log_postgres import PostgresDiscoveryLog

ALICE = Principal.of("alice", "acme", scopes=["*"])
BOB = Principal.of("bob", "acme", scopes=["*"])
TOOLS = [
    spec("shop.track_parcel", "Track a parcel by its tracking number."),
    spec("shop.refund", "Refund an order to the customer's card."),
    spec("shop.list_orders", "List a customer's recent orders."),
]


def test_one_hash_key_for_every_replica(pg_dsn: str) -> None:  # noqa: F811
    a = PostgresDiscoveryLog(pg_dsn)
    b = PostgresDiscoveryLog(pg_dsn, query_log="hash")
    assert a.query_hash("Where is my parcel") == b.query_hash("where is  my parcel")
    b.record_discovery("u", "t", "where is my parcel", ["x"], 0.9, 1.0)
    b.flush()
    (row,) = a.discoveries()  # a row written by one is read by the other, hashed the same way
    assert row.query is None and row.query_hash == a.query_hash("where is my parcel")
    with psycopg.connect(pg_dsn) as conn:
        keys = conn.execute(
            "SELECT count(*) FROM toolscout_log_meta WHERE key = 'hash_key'"
        ).fetchone()
    assert keys == (1,)
    a.close()
    b.close()


def test_a_discovery_logged_by_one_replica_is_known_to_the_other(pg_dsn: str) -> None:  # noqa: F811
    a = PostgresDiscoveryLog(pg_dsn)
    b = PostgresDiscoveryLog(pg_dsn)
    did = a.record_discovery("alice", "acme", "refund my order", ["shop.track_parcel"], 0.8, 2.0)
    # no flush of a: b waits a moment for a discovery another replica may still be writing
    assert b.owner(did) == ("alice", "acme")
    b.record_call("shop.refund", discovery_id=did, ok=True, subject="alice", tenant="acme")
    b.flush()
    (miss,) = a.false_negatives()
    assert (miss.tool_id, miss.misses, miss.example_queries) == ("shop.refund", 1,
                                                                 ("refund my order",))  # fmt: skip
    assert a.learned_pairs(tenant="acme") == [("shop.refund", "refund my order", 1)]
    assert a.stats()["calls"] == b.stats()["calls"] == 1
    a.close()
    b.close()


@pytest.fixture
def replicas(pg_dsn: str, tmp_path: Path) -> Iterator[tuple[Toolscout, Toolscout]]:  # noqa: F811
    def open_one(name: str) -> Toolscout:
        settings = Settings(db=pg_dsn, audit_path=tmp_path / f"{name}.audit.db")
        return Toolscout.open(settings, embedder=embedder(), executors=DryRunExecutor())

    with open_one("a") as a:
        a.add(TOOLS)
        with open_one("b") as b:
            yield a, b


def test_feedback_and_executions_reach_the_log_through_either_replica(
    replicas: tuple[Toolscout, Toolscout],
) -> None:
    a, b = replicas
    assert isinstance(a.catalog.log, PostgresDiscoveryLog)
    assert isinstance(b.catalog.log, PostgresDiscoveryLog)
    shortlist = a.discover(ALICE, "track my parcel", k=1, tier="progressive", conversation="c1")
    did = shortlist.discovery_id
    assert did is not None and shortlist.ids == ["shop.track_parcel"]
    with pytest.raises(UnknownDiscoveryError):
        b.feedback(BOB, did, "shop.refund")  # only the caller who made it speaks for it
    b.feedback(ALICE, did, "shop.refund")
    with pytest.raises(UnknownDiscoveryError):
        b.feedback(ALICE, "0" * 32, "shop.refund")
    linked = b.execute(ALICE, "shop.refund", {}, discovery_id=did)  # through the other replica
    assert linked.ok and linked.discovery_id == did
    same = a.execute(ALICE, "shop.list_orders", {}, conversation="c1")  # by conversation
    assert same.discovery_id == did
    log = a.catalog.log
    log.flush()
    b.catalog.log.flush()
    events = [(e.kind, e.tool_id, e.discovery_id, e.subject) for e in log.events()]
    assert events == [
        ("feedback", "shop.refund", did, "alice"),
        ("call", "shop.refund", did, "alice"),
        ("call", "shop.list_orders", did, "alice"),
    ]
    misses = {f.tool_id: f.misses for f in b.catalog.log.false_negatives()}
    assert misses == {"shop.refund": 2, "shop.list_orders": 1}
    assert ("shop.refund", "track my parcel", 1) in b.catalog.log.learned_pairs(tenant="acme")


_OPEN_AND_WRITE = textwrap.dedent(
    """
    import sys
    from toolscout.telemetry.log_postgres import PostgresDiscoveryLog

    log = PostgresDiscoveryLog(sys.argv[1], query_log="hash")
    did = log.record_discovery("p" + sys.argv[2], "acme", "same words", ["x"], 0.9, 1.0)
    log.close()
    print(did, log.query_hash("same words"))
    """
)


def test_processes_opening_a_fresh_database_at_once_share_one_log(pg_dsn: str) -> None:  # noqa: F811
    command = [sys.executable, "-c", _OPEN_AND_WRITE, pg_dsn]
    procs = [
        subprocess.Popen(
            [*command, str(i)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for i in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outs]
    answers = [out.split() for out, _ in outs]
    assert len({digest for _, digest in answers}) == 1  # one key, created once
    log = PostgresDiscoveryLog(pg_dsn)
    assert {log.owner(did) for did, _ in answers} == {(f"p{i}", "acme") for i in range(4)}
    assert answers[0][1] == log.query_hash("same words")
    log.close()


def test_a_lost_connection_is_opened_again_and_nothing_is_lost(pg_dsn: str) -> None:  # noqa: F811
    log = PostgresDiscoveryLog(pg_dsn)
    log.record_discovery("u", "t", "before", ["a"], 0.9, 1.0)
    log.flush()
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'toolscout-log' AND datname = current_database()"
        )
    log.record_discovery("u", "t", "after", ["a"], 0.9, 1.0)  # the writer reconnects
    assert [d.query for d in log.discoveries()] == ["before", "after"]
    admin_kill = psycopg.connect(pg_dsn, autocommit=True)
    admin_kill.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE application_name = 'toolscout-log' AND datname = current_database()"
    )
    admin_kill.close()
    assert log.tenants() == ["t"]  # and so does a reader
    log.close()


def test_a_bad_dsn_is_one_clear_error_naming_it_without_its_password() -> None:
    dsn = "postgresql://scout:s3cret@127.0.0.1:1/nowhere"
    with pytest.raises(StoreError) as err:
        open_log(dsn, query_log="hash")
    message = str(err.value)
    assert message.startswith("cannot open the discovery log in "
                              "postgresql://scout@127.0.0.1:1/nowhere: ")  # fmt: skip
    assert "s3cret" not in message and "\n" not in message
    assert redact("host=db password='a b' user=x") == "host=db password=*** user=x"
    assert redact("postgresql://u@h/db?password=pw&sslmode=require") == (
        "postgresql://u@h/db?password=***&sslmode=require"
    )


def test_the_first_migrations_draft_log_tables_are_set_aside(pg_dsn: str) -> None:  # noqa: F811
    """A database of the store's first schema had draft log tables nothing wrote: the second
    migration drops the empty ones and keeps one holding rows as ``<table>_v1``."""
    from toolscout.stores.postgres import PostgresStore

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE toolscout_migrations (version integer PRIMARY KEY)")
        conn.execute("INSERT INTO toolscout_migrations VALUES (1)")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(_FIRST_SCHEMA.read_text(encoding="utf-8"))
        for table, columns in _DRAFTS.items():
            conn.execute(f"CREATE TABLE {table} ({columns})")
        conn.execute("INSERT INTO toolscout_discoveries VALUES ('d0', now())")
    PostgresStore(pg_dsn).close()
    log = PostgresDiscoveryLog(pg_dsn)
    log.record_discovery("u", "t", "q", ["a"], 0.9, 1.0)
    assert len(log.discoveries()) == 1
    log.close()
    with psycopg.connect(pg_dsn) as conn:
        kept = conn.execute("SELECT id FROM toolscout_discoveries_v1").fetchall()
        gone = [
            conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()
            for name in ("toolscout_calls_v1", "toolscout_audit", "toolscout_audit_v1")
        ]
    assert kept == [("d0",)] and gone == [(None,)] * 3
    PostgresStore(pg_dsn).close()  # the log's own tables are not drafts: opened again, kept
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM toolscout_discoveries").fetchone() == (1,)


_FIRST_SCHEMA = (
    Path(__file__).parents[1] / "src/toolscout/stores/migrations/postgres/001_catalog.sql"
)
_DRAFTS = {
    "toolscout_discoveries": "id text PRIMARY KEY, at timestamptz NOT NULL DEFAULT now()",
    "toolscout_calls": "seq bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now()",
    "toolscout_audit": "seq bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now()",
}


def test_when_the_database_goes_away_recording_neither_raises_nor_blocks(
    pg_server: PostgresServer,  # noqa: F811
) -> None:
    dsn = pg_server.new_database()
    log = PostgresDiscoveryLog(dsn)
    log.record_discovery("u", "t", "before", ["a"], 0.9, 1.0)
    log.flush()
    with psycopg.connect(pg_server.dsn(), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{dsn.rsplit("/", 1)[1]}" WITH (FORCE)')
    started = time.monotonic()
    for i in range(2000):
        log.record_discovery("u", "t", f"lost {i}", ["a"], 0.9, 1.0)
        log.record_call("a", discovery_id=None, ok=True)
    log.flush()
    assert time.monotonic() - started < 10
    with pytest.raises(StoreError, match="discovery log in postgresql://"):
        log.discoveries()
    log.close()


def test_opening_beside_a_replica_mid_write_takes_no_table_lock(pg_dsn: str) -> None:  # noqa: F811
    """A replica inserts into the log's tables in a transaction while a new process opens
    the log: with the schema in place, opening must not take a lock that waits on the
    replica's rows (``CREATE INDEX IF NOT EXISTS`` takes a share lock even when the index
    exists; with the replica's next insert, the two deadlocked in a full run's soak)."""
    PostgresDiscoveryLog(pg_dsn).close()  # the schema, as the first replica leaves it
    with psycopg.connect(pg_dsn) as replica:
        with replica.transaction():
            replica.execute(
                "INSERT INTO toolscout_calls (ts, tool_id, ok) VALUES (%s, %s, %s)",
                (time.time(), "a.tool", 1),
            )
            started = time.monotonic()
            opened: list[PostgresDiscoveryLog] = []
            done = threading.Thread(target=lambda: opened.append(PostgresDiscoveryLog(pg_dsn)))
            done.daemon = True
            done.start()
            done.join(timeout=20)
            waited = time.monotonic() - started
            assert opened and not done.is_alive(), f"opening waited on the replica ({waited:.1f} s)"
        opened[0].close()
