"""SQLite-specific behaviour beyond the store contract: migrations and a second process."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from support import spec
from toolscout.errors import StoreError
from toolscout.stores.base import KIND_CARD, IndexedTool
from toolscout.stores.sqlite import MIGRATIONS, SQLiteStore


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
