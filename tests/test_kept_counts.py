"""The row counts kept beside derived maps (stores/sqlite_derived.py, ``derived_counts``):
a kept map is checked against its header with one row read, not by counting its rows
(0.28 s over pages not in memory at 100k tools), and the check still sees every row lost
or moved however it went; rows kept without counts (by an older toolscout) are counted."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from test_kept import KINDS, MAPS, _rebuilt, _store
from toolscout.discovery.kept import keep_maps, read_maps
from toolscout.stores import sqlite_derived
from toolscout.stores.sqlite import SQLiteStore


def _statements(store: SQLiteStore) -> list[str]:
    """Every SQL statement ``store``'s connection runs from now on."""
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    return seen


def _all_parts(maps: dict[str, Any]) -> None:
    """Use each part once (its check runs on first use)."""
    for part, m in maps.items():
        assert (MAPS[part] and next(iter(MAPS[part]))) in m


@pytest.mark.parametrize("in_steps", [False, True])
def test_a_kept_map_is_checked_by_its_kept_count_not_by_counting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_steps: bool
) -> None:
    monkeypatch.setattr(sqlite_derived, "DERIVED_STEP", 1)  # a count added per step
    store = _store(tmp_path)
    gen = store.generation()
    assert keep_maps(store, "k", gen, {p: (KINDS[p], MAPS[p]) for p in KINDS}, in_steps=in_steps)
    seen = _statements(store)
    log: list[str] = []
    found = read_maps(store, "k", gen, KINDS, _rebuilt(log))
    assert found is not None
    _all_parts(found[0])
    assert log == []
    assert any("FROM derived_counts" in s for s in seen)
    assert not [s for s in seen if "count(*)" in s]
    store.close()


def test_rows_lost_or_moved_by_hand_are_seen_through_the_kept_counts(tmp_path: Path) -> None:
    store = _store(tmp_path)
    gen = store.generation()
    keep_maps(store, "k", gen, {p: (KINDS[p], MAPS[p]) for p in KINDS})
    db = sqlite3.connect(tmp_path / "k.db")
    with db:  # one row lost; one moved from one part to another
        db.execute("DELETE FROM derived_rows WHERE part = 'names' AND name = 't.get'")
        db.execute("UPDATE derived_rows SET part = 'pairs' WHERE part = 'sets' AND name = 'b'")
    db.close()
    seen = _statements(store)
    log: list[str] = []
    found = read_maps(store, "k", gen, KINDS, _rebuilt(log))
    assert found is not None
    maps = found[0]
    assert maps["names"].get("t.get") == "t_get"  # rebuilt: the count went down
    assert maps["sets"]["b"] == frozenset()  # rebuilt: a row moved out
    assert maps["pairs"]["find order"] == MAPS["pairs"]["find order"]  # and one moved in
    assert maps["flags"] == MAPS["flags"]  # intact: read as kept
    assert sorted(log) == ["names", "pairs", "sets"]
    assert not [s for s in seen if "count(*)" in s]
    store.close()


def test_rows_kept_without_counts_are_counted_and_still_checked(tmp_path: Path) -> None:
    """What a toolscout before the counts kept (no ``derived_counts`` row): counted."""
    store = _store(tmp_path)
    gen = store.generation()
    keep_maps(store, "k", gen, {p: (KINDS[p], MAPS[p]) for p in KINDS})
    db = sqlite3.connect(tmp_path / "k.db")
    with db:
        db.execute("DELETE FROM derived_counts")
        db.execute("DELETE FROM derived_rows WHERE part = 'names' AND name = 't.get'")
    db.close()
    seen = _statements(store)
    log: list[str] = []
    found = read_maps(store, "k", gen, KINDS, _rebuilt(log))
    assert found is not None
    _all_parts(found[0])
    assert found[0]["names"].get("t.get") == "t_get"
    assert log == ["names"]
    assert len([s for s in seen if "count(*)" in s]) == len(KINDS)
    store.close()


def test_rows_replaced_or_dropped_leave_no_counts_behind(tmp_path: Path) -> None:
    store = _store(tmp_path)
    gen = store.generation()
    maps = {p: (KINDS[p], MAPS[p]) for p in KINDS}
    keep_maps(store, "thing:" + "a" * 16, gen, maps)
    keep_maps(store, "thing:" + "a" * 16, gen, maps, in_steps=True)  # replaces its rows
    db = sqlite3.connect(tmp_path / "k.db")
    try:
        counts = db.execute("SELECT token, part, n FROM derived_counts").fetchall()
        rows = db.execute("SELECT token, part, count(*) FROM derived_rows GROUP BY 1, 2").fetchall()
    finally:
        db.close()
    assert sorted(counts) == sorted(rows) and len({t for t, _, _ in counts}) == 1
    store.close()
