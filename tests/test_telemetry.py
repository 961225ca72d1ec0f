"""The discovery log: what it keeps of queries, per tenant and conversation, and for how long.

Every test that does not read the SQLite file itself runs over both backends: the
log in a SQLite file and the log in a PostgreSQL database (``log_place``)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from pg_fixture import pg_dsn, pg_server  # noqa: F401  (fixtures)
from support import embedder, spec
from toolscout.discovery.catalog import Catalog
from toolscout.errors import ConfigError
from toolscout.policy import Principal
from toolscout.settings import QUERY_TEXT_DAYS
from toolscout.telemetry.log import DiscoveryLog, open_log
from toolscout.telemetry.log_postgres import PostgresDiscoveryLog

SECRET = "zanzibar quokka marmalade invoice"
ROOT = Principal.of("root", "acme", scopes=["*"])


def file_bytes(db: Path) -> bytes:
    """The database file and its WAL and shared-memory files, as they are on disk."""
    return b"".join(p.read_bytes() for p in db.parent.iterdir() if p.name.startswith(db.name))


@dataclass
class LogPlace:
    """Where a test's log lives: a SQLite file or a PostgreSQL database."""

    target: str

    @property
    def postgres(self) -> bool:
        return self.target.startswith("postgresql://")

    def open(self, query_log: str = "text", retention_days: float | None = None) -> DiscoveryLog:
        log = open_log(self.target, query_log=query_log, retention_days=retention_days)
        assert log is not None
        assert isinstance(log, PostgresDiscoveryLog) == self.postgres
        return log

    def sql(self, statement: str) -> None:
        """Run ``statement`` on the database itself (``{discoveries}``: the table's name)."""
        if self.postgres:
            import psycopg

            with psycopg.connect(self.target, autocommit=True) as conn:
                conn.execute(statement.format(discoveries="toolscout_discoveries"))
            return
        with sqlite3.connect(self.target) as con:
            con.execute(statement.format(discoveries="discoveries"))
        con.close()

    def holds(self, text: str) -> bool:
        """Is ``text`` anywhere in the database: every byte of the SQLite file and its WAL;
        every row of every table in PostgreSQL."""
        if not self.postgres:
            return text.encode() in file_bytes(Path(self.target))
        import psycopg

        like = f"%{text}%"
        with psycopg.connect(self.target, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            ).fetchall()
            for (table,) in tables:
                query = f'SELECT 1 FROM "{table}" r WHERE r::text LIKE %s LIMIT 1'
                if conn.execute(query, (like,)).fetchone():
                    return True
        return False


@pytest.fixture(params=["sqlite", "postgres"])
def log_place(request: pytest.FixtureRequest, tmp_path: Path) -> LogPlace:
    if request.param == "postgres":
        return LogPlace(request.getfixturevalue("pg_dsn"))
    return LogPlace(str(tmp_path / "log.db"))


def test_events_round_trip(log_place: LogPlace) -> None:
    log = log_place.open()
    did = log.record_discovery("u1", "acme", "where is  my parcel", ["a.x"], 0.9, 3.0,
                               conversation="c1")  # fmt: skip
    log.record_call("a.y", discovery_id=did, ok=True, subject="u1", tenant="acme",
                    conversation="c1")  # fmt: skip
    log.record_feedback(did, "a.y")
    (d,) = log.discoveries()
    assert (d.query, d.conversation, d.shown, d.low) == ("where is my parcel", "c1", ("a.x",), 0)
    assert d.query_hash == log.query_hash("Where is my parcel")  # normalised, keyed
    assert log.owner(did) == ("u1", "acme") and log.owner("f" * 32) is None
    call, fb = log.events()
    assert (call.kind, call.tenant, call.conversation, fb.kind) == (
        "call",
        "acme",
        "c1",
        "feedback",
    )
    assert (call.discovery_id, call.ok, fb.discovery_id) == (did, True, did)
    assert log.stats() == {"discoveries": 1, "mean_confidence": 0.9, "mean_latency_ms": 3.0,
                           "calls": 1}  # fmt: skip
    assert [f.tool_id for f in log.false_negatives()] == ["a.y"]
    log.close()


def test_rows_come_back_oldest_first_in_the_order_written(log_place: LogPlace) -> None:
    log = log_place.open()
    ids = [log.record_discovery("u", "t", f"q{i}", ["a"], 0.9, 1.0) for i in range(50)]
    for did in ids:
        log.record_call("a", discovery_id=did, ok=True)
    log.flush()
    log_place.sql("UPDATE {discoveries} SET ts = 1000.0")  # equal times: insertion order decides
    assert [d.id for d in log.discoveries()] == ids
    assert [e.discovery_id for e in log.events()] == ids
    assert log.discoveries(since=2000.0) == [] and len(log.discoveries(until=1000.5)) == 50
    log.close()


def test_accepted_aliases_are_kept_with_their_evidence(log_place: LogPlace) -> None:
    log = log_place.open()
    log.record_accepted("al1", "a.x", "parcel", "acme", {"calls": 3})
    log.record_accepted("al2", "a.y", "refund", "acme", {"calls": 1}, source="feedback")
    log.record_accepted("al1", "a.x", "parcel", "acme", {"calls": 4})  # replaced, not doubled
    rows = log.accepted()
    assert [(r["id"], r["evidence"]) for r in rows] == [("al2", {"calls": 1}),
                                                       ("al1", {"calls": 4})]  # fmt: skip
    assert rows[0]["source"] == "feedback"
    log.close()


def test_low_confidence_and_empty_results_are_flagged(log_place: LogPlace) -> None:
    log = log_place.open()
    log.record_discovery("u", "t", "q1", ["a"], 0.2, 1.0)
    log.record_discovery("u", "t", "q2", [], 0.9, 1.0)
    log.record_discovery("u", "t", "q3", ["a"], 0.9, 1.0, low_confidence=False)
    assert [d.low for d in log.discoveries()] == [True, True, False]
    log.close()


def test_learned_pairs_stay_within_their_tenant(log_place: LogPlace) -> None:
    log = log_place.open()
    a = log.record_discovery("u", "acme", "bill the client", [], 0.9, 1.0)
    g = log.record_discovery("v", "globex", "ship it now", [], 0.9, 1.0)
    log.record_call("billing.create_invoice", discovery_id=a, ok=True)
    log.record_call("orders.ship", discovery_id=g, ok=True)
    assert log.learned_pairs(tenant="acme") == [("billing.create_invoice", "bill the client", 1)]
    assert log.learned_pairs(tenant="globex") == [("orders.ship", "ship it now", 1)]
    assert len(log.learned_pairs()) == 2 and sorted(log.tenants()) == ["acme", "globex"]
    assert log.learned_pairs(min_count=2) == []
    log.close()


@pytest.mark.parametrize("mode", ["text", "hash", "none"])
def test_query_storage_setting_reaches_every_byte_of_the_file(
    log_place: LogPlace, mode: str
) -> None:
    catalog = Catalog.open(log_place.target, embedder=embedder(), query_log=mode)
    catalog.add([spec("shop.track_parcel", "Track a parcel by its tracking number."),
                 spec("shop.refund", "Refund an order.")])  # fmt: skip
    log = catalog.log
    assert log is not None and log.query_log == mode
    for i in range(3):
        shortlist = catalog.discover(f"{SECRET} {i}", ROOT, k=1, tier="progressive")
        log.record_call("shop.refund", discovery_id=shortlist.discovery_id, ok=True)
    catalog.learn()  # usage-learned aliases come from the log: nothing to learn without text
    rows = log.discoveries()
    assert len(rows) == 3
    catalog.close()
    if mode == "text":
        assert log_place.holds(SECRET)  # the search below can find text when it is there
        assert rows[0].query is not None
    else:
        assert not any(log_place.holds(word) for word in ("zanzibar", "quokka", "marmalade"))
        assert all(r.query is None for r in rows)
        assert all((r.query_hash is None) == (mode == "none") for r in rows)


def test_a_stricter_setting_scrubs_what_a_laxer_one_kept(log_place: LogPlace) -> None:
    log = log_place.open()
    did = log.record_discovery("u", "t", SECRET, ["a"], 0.9, 1.0)
    log.record_call("b", discovery_id=did, ok=True)
    log.close()
    hashed = log_place.open(query_log="hash")
    (row,) = hashed.discoveries()
    assert row.query is None and row.query_hash == hashed.query_hash(SECRET)
    hashed.close()
    assert not log_place.holds("zanzibar")
    none = log_place.open(query_log="none")
    assert none.discoveries()[0].query_hash is None
    assert none.false_negatives()[0].misses == 1  # still counted
    none.close()


def test_pruning_by_age_removes_rows_and_their_text(log_place: LogPlace) -> None:
    log = log_place.open()
    did = log.record_discovery("u", "t", SECRET, ["a"], 0.9, 1.0)
    log.record_call("a", discovery_id=did, ok=True)
    assert log.prune(1.0) == 0  # nothing is a day old
    assert log.prune(0.0) == 2
    assert log.discoveries() == [] and log.events() == []
    log.close()
    assert not log_place.holds("zanzibar")
    again = log_place.open()
    with pytest.raises(ConfigError, match="must not be negative"):
        again.prune(-1)
    again.close()


def test_retention_applies_at_open(log_place: LogPlace) -> None:
    old = log_place.open()
    old.record_discovery("u", "t", "old query", ["a"], 0.9, 1.0)
    old.close()
    log_place.sql("UPDATE {discoveries} SET ts = ts - 40 * 86400")
    log = log_place.open(retention_days=30)
    log.record_discovery("u", "t", "new query", ["a"], 0.9, 1.0)
    assert [d.query for d in log.discoveries()] == ["new query"]
    log.close()


def test_query_text_is_kept_for_a_bounded_time_then_only_its_hash(log_place: LogPlace) -> None:
    old = log_place.open()
    did = old.record_discovery("u", "t", SECRET, ["a"], 0.9, 1.0)
    old.record_call("b", discovery_id=did, ok=True)
    old.close()
    log_place.sql("UPDATE {discoveries} SET ts = ts - 31 * 86400")  # past the default 30 days
    log = log_place.open()
    assert log.query_text_days == QUERY_TEXT_DAYS == 30
    log.record_discovery("u", "t", "a recent question", ["a"], 0.9, 1.0)
    rows = {d.id: d for d in log.discoveries()}
    assert rows[did].query is None and rows[did].query_hash == log.query_hash(SECRET)
    assert [d.query for d in rows.values() if d.id != did] == ["a recent question"]
    assert log.false_negatives()[0].misses == 1  # still counted
    assert log.reduce_query_text(0.0) == 1  # the recent one too, on demand
    log.close()
    assert not log_place.holds("zanzibar") and not log_place.holds("recent question")
    kept = open_log(log_place.target, query_text_days=None)  # kept until pruned: opt-in
    assert kept is not None and kept.query_text_days is None
    kept.close()
    with pytest.raises(ConfigError, match="query_text_days must be positive"):
        open_log(log_place.target, query_text_days=0)


def test_bad_settings_are_clear_errors(log_place: LogPlace) -> None:
    with pytest.raises(ConfigError, match="query_log must be one of text, hash, none"):
        log_place.open(query_log="everything")
    with pytest.raises(ConfigError, match="retention_days must be positive"):
        log_place.open(retention_days=0)


def test_an_in_memory_catalog_keeps_no_log() -> None:
    assert open_log(":memory:") is None and open_log("memory:") is None


def test_a_first_version_log_is_upgraded_in_place(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE TABLE discoveries (id TEXT PRIMARY KEY, ts REAL NOT NULL, subject TEXT NOT NULL,"
        " tenant TEXT NOT NULL, query TEXT NOT NULL, shown TEXT NOT NULL, confidence REAL NOT NULL,"
        " latency_ms REAL NOT NULL);"
        "CREATE TABLE calls (ts REAL NOT NULL, discovery_id TEXT, tool_id TEXT NOT NULL,"
        " ok INTEGER NOT NULL);"
        "INSERT INTO discoveries VALUES ('d1', 1.0, 'u', 't', 'old words', '[\"a\"]', 0.9, 1.0);"
        "INSERT INTO calls VALUES (2.0, 'd1', 'b', 1);"
    )
    con.close()
    log = DiscoveryLog(db, query_log="none")
    assert log.discoveries()[0].query is None and log.events()[0].kind == "call"
    log.record_discovery("u", "t", "new", [], 0.1, 1.0, conversation="c")
    assert len(log.discoveries()) == 2 and log.false_negatives()[0].tool_id == "b"
    log.close()
