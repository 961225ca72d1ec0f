"""SQLite-specific behaviour beyond the store contract: migrations and a second process."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from support import spec
from toolscout.errors import StoreError
from toolscout.stores.base import KIND_CARD, IndexedTool
from toolscout.stores.sqlite import MIGRATIONS, SHARED_SCOPE, SQLiteStore, scope_value


def _vec() -> np.ndarray:
    v = np.zeros(384, dtype=np.float32)
    v[0] = 1.0
    return v


def test_a_new_file_is_at_the_latest_schema_version(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    assert store.schema_version() == len(MIGRATIONS)
    store.close()


def test_a_file_from_before_migrations_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0])  # the first release's tables, no version recorded
    db.execute("INSERT INTO meta(key, value) VALUES ('policy', '{}')")
    db.commit()
    db.close()
    store = SQLiteStore(path)
    assert store.schema_version() == len(MIGRATIONS)
    assert store.meta("policy") == "{}"
    store.learned_add([("t", "phrase", 1)])  # a table the second migration added
    assert store.generation() == 0
    store.close()


def test_the_lexical_index_gains_its_scope_column_in_place(tmp_path: Path) -> None:
    """A file of the second schema: its tools are found after the upgrade, each tenant's
    narrowed to it, and nothing is re-embedded."""
    path = tmp_path / "v2.db"
    db = sqlite3.connect(path)
    for script in MIGRATIONS[:2]:
        db.executescript(script)
    db.execute("PRAGMA user_version = 2")
    cards = {
        1: spec("acme.refund", tenants=["acme"]),
        2: spec("bé.refund", tenants=["Bé Corp", "acme"]),
        3: spec("all.refund"),
        4: spec("other.refund", tenants=["other"]),
    }
    for rid, s in cards.items():
        db.execute(
            "INSERT INTO tools(rid, id, card, parameters, content_hash, updated_at)"
            " VALUES (?, ?, ?, '{}', 'h', 0)",
            (rid, s.id, json.dumps(s.card.to_dict())),
        )
        db.execute("INSERT INTO tool_fts(rowid, name) VALUES (?, 'refund invoice')", (rid,))
    db.commit()
    db.close()
    store = SQLiteStore(path)
    assert store.schema_version() == len(MIGRATIONS)
    df, n_docs = store.document_frequency()
    assert n_docs == 4 and df["refund"] == 4  # the scope tokens are not terms
    assert not any(t.startswith("zzscope") for t in df)
    acme = frozenset({"acme.refund", "bé.refund", "all.refund"})
    assert sorted(store.lexical(["refund"], acme, 10, weights={"name": 1.0}).ids) == sorted(acme)
    other = frozenset({"other.refund", "all.refund"})
    assert sorted(store.lexical(["refund"], other, 10, weights={"name": 1.0}).ids) == sorted(other)
    assert store._scopes is not None
    assert store._scopes.filter(other)  # half the catalog: narrowed, not all ranked
    assert not store._scopes.filter(acme)  # three quarters: the filter would only cost
    scopes = dict(store._db.execute("SELECT rowid, scope FROM tool_fts").fetchall())
    assert scopes == {
        1: scope_value(["acme"]),
        2: scope_value(["Bé Corp", "acme"]),
        3: SHARED_SCOPE,
        4: scope_value(["other"]),
    }
    store.close()


def test_a_file_from_a_newer_toolscout_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    with pytest.raises(StoreError, match="upgrade toolscout"):
        SQLiteStore(path)


def test_another_connections_write_moves_the_generation_and_drops_caches(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    first, second = SQLiteStore(path), SQLiteStore(path)
    tool = IndexedTool(spec("a.one"), {"name": "one"}, [(KIND_CARD, "h1")])
    first.upsert([tool], {"h1": _vec()}, model_id="m")
    g = second.generation()
    assert second.document_frequency()[1] == 1
    first.upsert([IndexedTool(spec("a.two"), {"name": "two"}, [(KIND_CARD, "h1")])], {},
                 model_id="m")  # fmt: skip
    assert second.generation() > g
    assert second.document_frequency()[1] == 2
    assert set(second.dense(_vec(), frozenset({"a.one", "a.two"}), 5, kinds={KIND_CARD},
                            model_id="m").ids) == {"a.one", "a.two"}  # fmt: skip
    first.close()
    second.close()


def test_derived_state_is_kept_for_the_current_generation_only(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "d.db")
    assert store.derived("k") is None  # no table yet: nothing kept, no error
    gen = store.generation()
    assert store.set_derived("k", gen, b"\x00blob")
    assert store.generation() == gen  # keeping derived state never moves the generation
    assert store.derived("k") == (gen, b"\x00blob")
    assert not store.set_derived("k", gen + 1, b"future")  # not the current generation
    store.set_meta("x", "1")
    assert store.derived("k") == (gen, b"\x00blob")  # kept with its (now old) generation
    store.close()
    again = SQLiteStore(tmp_path / "d.db")
    assert again.derived("k") == (gen, b"\x00blob")
    again.close()
