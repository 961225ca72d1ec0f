"""The discovery log: what it keeps of queries, per tenant and conversation, and for how long."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from support import embedder, spec
from toolscout.discovery.catalog import Catalog
from toolscout.errors import ConfigError
from toolscout.policy import Principal
from toolscout.telemetry.log import DiscoveryLog

SECRET = "zanzibar quokka marmalade invoice"
ROOT = Principal.of("root", "acme", scopes=["*"])


def file_bytes(db: Path) -> bytes:
    """The database file and its WAL and shared-memory files, as they are on disk."""
    return b"".join(p.read_bytes() for p in db.parent.iterdir() if p.name.startswith(db.name))


def test_events_round_trip(tmp_path: Path) -> None:
    log = DiscoveryLog(tmp_path / "log.db")
    did = log.record_discovery("u1", "acme", "where is  my parcel", ["a.x"], 0.9, 3.0,
                               conversation="c1")  # fmt: skip
    log.record_call("a.y", discovery_id=did, ok=True, subject="u1", tenant="acme",
                    conversation="c1")  # fmt: skip
    log.record_feedback(did, "a.y")
    (d,) = log.discoveries()
    assert (d.query, d.conversation, d.shown, d.low) == ("where is my parcel", "c1", ("a.x",), 0)
    assert d.query_hash == log.query_hash("Where is my parcel")  # normalised, keyed
    call, fb = log.events()
    assert (call.kind, call.tenant, call.conversation, fb.kind) == (
        "call",
        "acme",
        "c1",
        "feedback",
    )
    assert log.stats()["calls"] == 1
    assert [f.tool_id for f in log.false_negatives()] == ["a.y"]
    log.close()


def test_low_confidence_and_empty_results_are_flagged(tmp_path: Path) -> None:
    log = DiscoveryLog(tmp_path / "log.db")
    log.record_discovery("u", "t", "q1", ["a"], 0.2, 1.0)
    log.record_discovery("u", "t", "q2", [], 0.9, 1.0)
    log.record_discovery("u", "t", "q3", ["a"], 0.9, 1.0, low_confidence=False)
    assert [d.low for d in log.discoveries()] == [True, True, False]
    log.close()


def test_learned_pairs_stay_within_their_tenant(tmp_path: Path) -> None:
    log = DiscoveryLog(tmp_path / "log.db")
    a = log.record_discovery("u", "acme", "bill the client", [], 0.9, 1.0)
    g = log.record_discovery("v", "globex", "ship it now", [], 0.9, 1.0)
    log.record_call("billing.create_invoice", discovery_id=a, ok=True)
    log.record_call("orders.ship", discovery_id=g, ok=True)
    assert log.learned_pairs(tenant="acme") == [("billing.create_invoice", "bill the client", 1)]
    assert log.learned_pairs(tenant="globex") == [("orders.ship", "ship it now", 1)]
    assert len(log.learned_pairs()) == 2 and sorted(log.tenants()) == ["acme", "globex"]
    log.close()


@pytest.mark.parametrize("mode", ["text", "hash", "none"])
def test_query_storage_setting_reaches_every_byte_of_the_file(tmp_path: Path, mode: str) -> None:
    db = tmp_path / "tools.db"
    catalog = Catalog.open(db, embedder=embedder(), log=False)
    catalog.add([spec("shop.track_parcel", "Track a parcel by its tracking number."),
                 spec("shop.refund", "Refund an order.")])  # fmt: skip
    catalog.log = DiscoveryLog(db, query_log=mode)
    for i in range(3):
        shortlist = catalog.discover(f"{SECRET} {i}", ROOT, k=1, tier="progressive")
        catalog.log.record_call("shop.refund", discovery_id=shortlist.discovery_id, ok=True)
    catalog.learn()  # usage-learned aliases come from the log: nothing to learn without text
    rows = catalog.log.discoveries()
    assert len(rows) == 3
    catalog.close()
    blob = file_bytes(db)
    if mode == "text":
        assert SECRET.encode() in blob  # the grep below can find text when it is there
        assert rows[0].query is not None
    else:
        assert b"zanzibar" not in blob and b"quokka" not in blob and b"marmalade" not in blob
        assert all(r.query is None for r in rows)
        assert all((r.query_hash is None) == (mode == "none") for r in rows)


def test_a_stricter_setting_scrubs_what_a_laxer_one_kept(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    log = DiscoveryLog(db)
    did = log.record_discovery("u", "t", SECRET, ["a"], 0.9, 1.0)
    log.record_call("b", discovery_id=did, ok=True)
    log.close()
    hashed = DiscoveryLog(db, query_log="hash")
    (row,) = hashed.discoveries()
    assert row.query is None and row.query_hash == hashed.query_hash(SECRET)
    hashed.close()
    assert b"zanzibar" not in file_bytes(db)
    none = DiscoveryLog(db, query_log="none")
    assert none.discoveries()[0].query_hash is None
    assert none.false_negatives()[0].misses == 1  # still counted
    none.close()


def test_pruning_by_age_removes_rows_and_their_text(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    log = DiscoveryLog(db)
    did = log.record_discovery("u", "t", SECRET, ["a"], 0.9, 1.0)
    log.record_call("a", discovery_id=did, ok=True)
    assert log.prune(1.0) == 0  # nothing is a day old
    assert log.prune(0.0) == 2
    assert log.discoveries() == [] and log.events() == []
    log.close()
    assert b"zanzibar" not in file_bytes(db)
    with pytest.raises(ConfigError, match="must not be negative"):
        DiscoveryLog(db).prune(-1)


def test_retention_applies_at_open(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    old = DiscoveryLog(db)
    old.record_discovery("u", "t", "old query", ["a"], 0.9, 1.0)
    old.close()
    con = sqlite3.connect(db)
    con.execute("UPDATE discoveries SET ts = ts - 40 * 86400")
    con.commit()
    con.close()
    log = DiscoveryLog(db, retention_days=30)
    log.record_discovery("u", "t", "new query", ["a"], 0.9, 1.0)
    assert [d.query for d in log.discoveries()] == ["new query"]
    log.close()


def test_bad_settings_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="query_log must be one of text, hash, none"):
        DiscoveryLog(tmp_path / "a.db", query_log="everything")
    with pytest.raises(ConfigError, match="retention_days must be positive"):
        DiscoveryLog(tmp_path / "b.db", retention_days=0)


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
