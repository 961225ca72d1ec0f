"""discovery/kept.py: a kept map's rows go when a newer generation is kept under the same
key, whether or not a reader holds them, so a read that misses keys must know the rows
were there; a marked map knows it from the mark it reads beside them (its header is not
read again), a map kept without the mark reads its header as before."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from test_kept import KINDS, MAPS, _rebuilt
from toolscout.discovery.kept import (
    MARK,
    MARKED_PART,
    MARKED_READ,
    KeptMap,
    keep_maps,
    read_maps,
)
from toolscout.stores.base import HELD_PART
from toolscout.stores.sqlite import SQLiteStore

KEY = "thing:" + "c" * 16
NEWER: dict[str, Any] = {
    "sets": {"z": frozenset({"q"})},
    "pairs": {"open ticket": [("t.open", "name")]},
    "names": {"t.open": "t_open"},
    "flags": frozenset({"open"}),
}


class Counting:
    """A store that counts the reads of a kept header (``derived``), passing every call on."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.header_reads = 0

    def derived(self, key: str) -> tuple[int, bytes] | None:
        self.header_reads += 1
        return self.store.derived(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def _tokens(db: Path) -> set[str]:
    con = sqlite3.connect(db)
    try:
        return {t for (t,) in con.execute("SELECT DISTINCT token FROM derived_rows")}
    finally:
        con.close()


def _token(store: SQLiteStore) -> str:
    kept = store.derived(KEY)
    assert kept is not None
    return str(json.loads(kept[1])["token"])


def _maps(maps: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    return {p: (KINDS[p], maps[p]) for p in KINDS}


@pytest.mark.parametrize("in_steps", [False, True])
def test_a_held_maps_rows_go_when_a_newer_generation_is_kept_and_it_is_rebuilt(
    tmp_path: Path, in_steps: bool
) -> None:
    """The race a check limited to maps read without a hold would lose: the reader holds
    the rows, the catalog moves on, and this version keeps the newer generation's map
    under the same key, which removes the held rows. The held map, asked next for a key
    it kept, rebuilds; it never answers "not kept" from the rows that are left."""
    store = SQLiteStore(tmp_path / "k.db")
    gen = store.generation()
    assert keep_maps(store, KEY, gen, _maps(MAPS))
    old = _token(store)
    log: list[str] = []
    found = read_maps(store, KEY, gen, KINDS, _rebuilt(log))
    assert found is not None
    names, pairs = found[0]["names"], found[0]["pairs"]
    assert names["t.find"] == "t_find" and pairs.get("nope") is None and log == []
    store.set_meta("moved", "1")  # a catalog write: a newer generation
    newer = store.generation()
    assert newer > gen
    assert keep_maps(store, KEY, newer, _maps(NEWER), in_steps=in_steps)
    assert old not in _tokens(tmp_path / "k.db")  # removed, though held
    assert names.get("t.get") == "t_get" and log == ["names"]  # rebuilt, not a miss
    assert pairs.get("find order") == MAPS["pairs"]["find order"] and log == ["names", "pairs"]
    assert found[0]["sets"]["a"] == frozenset({"x", "y"})
    store.close()


def test_rows_removed_in_key_order_take_the_mark_first(tmp_path: Path) -> None:
    """Another version's rows go after their header, a range of keys at a time in key
    order: the mark is the first key, so a read that finds rows left but not the mark
    rebuilds the map."""
    store = SQLiteStore(tmp_path / "k.db")
    gen = store.generation()
    big = {f"k{i:03d}": f"v{i}" for i in range(50)}
    kinds = {"names": "str"}
    assert keep_maps(store, KEY, gen, {"names": ("str", big)})
    token = _token(store)
    log: list[str] = []

    def rebuild(part: str) -> dict[str, str]:
        log.append(part)
        return big

    found = read_maps(store, KEY, gen, kinds, rebuild)
    assert found is not None
    names = found[0]["names"]
    assert names["k000"] == "v0" and log == []
    con = sqlite3.connect(tmp_path / "k.db")
    with con:  # the header, then the first range of keys (the store's step, made small)
        con.execute("DELETE FROM derived WHERE key = ?", (KEY,))
        con.execute("DELETE FROM derived_rows WHERE token = ? AND name <= 'k010'", (token,))
    con.close()
    # k040 is still a row: read with a key that is gone, the map is rebuilt whole
    assert names.get("k005") == "v5" and log == ["names"]
    store.close()


def test_a_marked_map_misses_keys_without_reading_its_header(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "k.db")
    gen = store.generation()
    assert keep_maps(store, KEY, gen, _maps(MAPS))
    kept = store.derived(KEY)
    assert kept is not None and MARKED_PART in json.loads(kept[1])["counts"]
    counting = Counting(store)
    found = read_maps(counting, KEY, gen, KINDS, _rebuilt([]))
    assert found is not None
    reads = counting.header_reads
    pairs, flags = found[0]["pairs"], found[0]["flags"]
    pairs.read_ahead(["find order", "no such", "nor this"])
    assert pairs.get("no such") is None and pairs["find order"] == MAPS["pairs"]["find order"]
    flags.read_ahead(["find", "absent"])
    assert "find" in flags and "absent" not in flags
    assert counting.header_reads == reads  # misses, and no header read again
    # more keys than one read asks for beside the mark: checked against the header
    pairs.read_ahead([f"w{i}" for i in range(MARKED_READ + 1)])
    assert counting.header_reads == reads + 1 and pairs.get("w7") is None
    store.close()


def test_a_map_kept_without_the_mark_reads_its_header_after_a_miss(tmp_path: Path) -> None:
    """As an earlier version kept it (no mark part, no mark rows): read as before."""
    store = SQLiteStore(tmp_path / "k.db")
    gen = store.generation()
    counts = {"names": len(MAPS["names"]), HELD_PART: 0}
    header = json.dumps({"token": "t0", "counts": counts, "extra": {}}).encode()
    rows = {"names": [(k, json.dumps(v)) for k, v in MAPS["names"].items()]}
    assert store.set_derived_rows(KEY, gen, header, "t0", rows)
    counting = Counting(store)
    found = read_maps(counting, KEY, gen, {"names": "str"}, _rebuilt([]))
    assert found is not None
    reads = counting.header_reads
    names = found[0]["names"]
    assert names.get("nope") is None and names["t.get"] == "t_get"
    assert counting.header_reads == reads + 1
    assert dict(names) == MAPS["names"] and len(names) == 2
    store.close()


def test_the_mark_is_no_key_of_the_map(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "k.db")
    gen = store.generation()
    assert keep_maps(store, KEY, gen, _maps(MAPS))
    log: list[str] = []
    found = read_maps(store, KEY, gen, KINDS, _rebuilt(log))
    assert found is not None
    maps = found[0]
    assert maps["names"].get(MARK) is None and MARK not in maps["flags"]
    assert dict(maps["names"]) == MAPS["names"] and len(maps["names"]) == 2
    assert set(maps["flags"]) == MAPS["flags"] and len(maps["flags"]) == 2
    assert dict(maps["sets"]) == MAPS["sets"]
    assert log == []  # every part read as kept, none rebuilt
    store.close()


def test_a_map_with_the_marks_key_is_kept_unmarked(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "k.db")
    gen = store.generation()
    odd = {"": "empty", "a": "b"}
    assert keep_maps(store, KEY, gen, {"names": ("str", odd)})
    kept = store.derived(KEY)
    assert kept is not None and MARKED_PART not in json.loads(kept[1])["counts"]
    never: Callable[[str], Any] = _rebuilt([])
    found = read_maps(store, KEY, gen, {"names": "str"}, never)
    assert found is not None
    names = found[0]["names"]
    assert isinstance(names, KeptMap)
    assert names.get("") == "empty" and names.get("zz") is None and dict(names) == odd
    store.close()


def test_a_read_of_the_mark_and_as_many_keys_as_a_marked_read_asks_is_one_statement(
    tmp_path: Path,
) -> None:
    """The mark proves the rows of the read it is found in: the SQLite store must read
    the mark and :data:`MARKED_READ` keys in one statement (one snapshot)."""
    store = SQLiteStore(tmp_path / "k.db")
    gen = store.generation()
    assert keep_maps(store, KEY, gen, _maps(MAPS))
    token = _token(store)
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    try:
        got = store.derived_rows(token, "names", [MARK, *(f"n{i}" for i in range(MARKED_READ))])
    finally:
        store._db.set_trace_callback(None)
    assert got == {MARK: "1"}
    assert len([s for s in statements if "derived_rows" in s]) == 1
    store.close()
