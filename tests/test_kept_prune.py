"""Rows another version kept for the current generation go once no process reads them
(stores/sqlite_holds.py, stores/sqlite_derived.py, discovery/kept.py): a reader holds
them (a shared lock on the catalog's readers' lock file) while it may read them; they
are removed only when nothing holds them, and never those of a version before the holds
(its readers hold nothing). A reader whose rows were removed anyway (an older
generation's) rebuilds the map rather than answer from what is left."""

from __future__ import annotations

import gc
import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from support import embedder
from test_kept import KINDS, MAPS, PEOPLE, QUERIES, _rebuilt, first_process
from test_kept_upgrade import _upgrade
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.kept import HELD_PART, keep_maps, read_maps, stale_maps
from toolscout.stores import sqlite_derived, sqlite_holds
from toolscout.stores.sqlite import SQLiteStore

OLD, NEW = "thing:" + "a" * 16, "thing:" + "b" * 16


def _kept(db: Path) -> tuple[set[str], set[str], set[str]]:
    """The keys, the tokens with rows, and the tokens with counts in the file at ``db``."""
    con = sqlite3.connect(db)
    try:
        keys = {k for (k,) in con.execute("SELECT key FROM derived")}
        rows = {t for (t,) in con.execute("SELECT DISTINCT token FROM derived_rows")}
        counts = {t for (t,) in con.execute("SELECT token FROM derived_counts")}
    finally:
        con.close()
    return keys, rows, counts


def _token(store: SQLiteStore, key: str) -> str:
    kept = store.derived(key)
    assert kept is not None
    return str(json.loads(kept[1])["token"])


def _two_versions(tmp_path: Path) -> tuple[SQLiteStore, int, str]:
    store = SQLiteStore(tmp_path / "k.db")
    gen = store.generation()
    assert keep_maps(store, OLD, gen, {p: (KINDS[p], MAPS[p]) for p in KINDS})
    return store, gen, _token(store, OLD)


def test_the_header_names_the_held_part_and_the_store_knows_it() -> None:
    assert HELD_PART == sqlite_derived.HELD_PART


def test_another_versions_rows_go_once_no_reader_in_this_process_holds_them(
    tmp_path: Path,
) -> None:
    store, gen, old = _two_versions(tmp_path)
    reading = read_maps(store, OLD, gen, KINDS, _rebuilt([]))
    assert reading is not None and reading[0]["names"]["t.get"] == "t_get"
    assert keep_maps(store, NEW, gen, {p: (KINDS[p], MAPS[p]) for p in KINDS})
    keys, rows, counts = _kept(tmp_path / "k.db")
    assert OLD in keys and old in rows  # held: it stays
    assert reading[0]["sets"]["a"] == frozenset({"x", "y"})  # and reads as kept
    del reading
    gc.collect()
    store.drop_superseded(NEW, gen)
    keys, rows, counts = _kept(tmp_path / "k.db")
    assert keys == {NEW} and old not in rows and old not in counts
    found = read_maps(store, NEW, gen, KINDS, _rebuilt([]))
    assert found is not None and dict(found[0]["names"]) == MAPS["names"]
    store.close()


_READER = """
import sys
import threading
sys.path.insert(0, sys.argv[1])
from test_kept import KINDS, _rebuilt
from toolscout.discovery.kept import read_maps
from toolscout.stores.sqlite import SQLiteStore
store = SQLiteStore(sys.argv[2])
found = read_maps(store, sys.argv[3], int(sys.argv[4]), KINDS, _rebuilt([]))
print("reading" if found is not None else "none", flush=True)
sys.stdin.readline()
print(found[0]["names"]["t.get"] if found else "-", flush=True)
"""


def test_rows_a_reader_in_another_process_holds_stay_until_it_ends(tmp_path: Path) -> None:
    store, gen, old = _two_versions(tmp_path)
    tests = str(Path(__file__).parent)
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER, tests, str(tmp_path / "k.db"), OLD, str(gen)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "reading"
        assert keep_maps(store, NEW, gen, {p: (KINDS[p], MAPS[p]) for p in KINDS}, in_steps=True)
        store.drop_superseded(NEW, gen)
        keys, rows, _ = _kept(tmp_path / "k.db")
        assert OLD in keys and old in rows  # the other process holds them
        out, _ = reader.communicate("go\n", timeout=60)
        assert out.strip() == "t_get"  # read as kept, after the write beside it
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    store.drop_superseded(NEW, gen)  # its process ended: nothing holds them
    keys, rows, _ = _kept(tmp_path / "k.db")
    assert keys == {NEW} and old not in rows
    store.close()


def test_rows_of_a_version_before_the_holds_stay_for_their_generation(tmp_path: Path) -> None:
    """Its header does not name the held part: its readers hold nothing, so whether one
    reads them is not known, and they stay until the generation moves (as before)."""
    store, gen, old = _two_versions(tmp_path)
    kept = store.derived(OLD)
    assert kept is not None
    header = json.loads(kept[1])
    del header["counts"][HELD_PART]
    assert store.set_derived(OLD, gen, json.dumps(header).encode())
    assert keep_maps(store, NEW, gen, {p: (KINDS[p], MAPS[p]) for p in KINDS})
    store.drop_superseded(NEW, gen)
    keys, rows, _ = _kept(tmp_path / "k.db")
    assert OLD in keys and old in rows
    found = read_maps(store, OLD, gen, KINDS, _rebuilt([]))  # still read as it was
    assert found is not None and found[0]["names"]["t.get"] == "t_get"
    store.close()


def test_a_map_whose_rows_are_removed_while_read_is_rebuilt_not_answered_from(
    tmp_path: Path,
) -> None:
    """A map nothing held (kept by a version before the holds, or of a generation that
    has moved on) loses its header, then its rows, under a reader that has checked it: a
    key it asks for next misses, the header is gone, and the map is rebuilt whole."""
    store, gen, old = _two_versions(tmp_path)
    log: list[str] = []
    found = read_maps(store, OLD, gen, KINDS, _rebuilt(log))
    assert found is not None
    names = found[0]["names"]
    assert names["t.find"] == "t_find" and log == []  # checked, and read as kept
    con = sqlite3.connect(tmp_path / "k.db")
    with con:  # what the store does: the header first, then the rows
        con.execute("DELETE FROM derived WHERE key = ?", (OLD,))
        con.execute("DELETE FROM derived_rows WHERE token = ?", (old,))
    con.close()
    assert names.get("t.get") == "t_get" and log == ["names"]
    store.close()


def test_a_missed_key_with_the_header_in_place_is_a_miss(tmp_path: Path) -> None:
    store, gen, _ = _two_versions(tmp_path)
    log: list[str] = []
    found = read_maps(store, OLD, gen, KINDS, _rebuilt(log))
    assert found is not None
    assert found[0]["names"].get("t.nope") is None and log == []
    store.close()


def test_an_upgrade_removes_the_older_versions_rows_once_its_own_are_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "c.db"
    asked, _, _ = first_process(db)  # the older version's process, closed
    before, _, _ = _kept(db)
    _upgrade(monkeypatch)
    with Catalog.open(db, embedder=embedder()) as new:
        answered = [new.discover(q, p).ids for q in QUERIES for p in PEOPLE]
        new.wait_kept()
        after, rows, counts = _kept(db)
    assert answered == asked
    parts = ("phrase-index:", "name-table:", "finder-index:")
    old = {k for k in before if k.startswith(parts)}
    assert len(old) == 3 and not old & after
    assert {k for k in after if k.startswith(parts)} == {
        "phrase-index:another-version0", "name-table:another-version0",
        "finder-index:another-version0",
    }  # fmt: skip
    assert rows == counts and len(rows) == 3  # this version's three maps' rows, no other


def test_of_several_versions_rows_one_its_readers_hold_is_served(tmp_path: Path) -> None:
    """An upgrade serves, of the rows other versions kept, those of a version with holds
    first (not removed while served; checked by their kept count): the rows of a version
    before them, listed first here, would be counted whole before the first answer."""
    store = SQLiteStore(tmp_path / "k.db")
    gen = store.generation()
    older = "thing:" + "0" * 16
    assert keep_maps(store, older, gen, {p: (KINDS[p], MAPS[p]) for p in KINDS})
    kept = store.derived(older)
    assert kept is not None
    header = json.loads(kept[1])
    del header["counts"][HELD_PART]  # kept by a version before the holds
    assert store.set_derived(older, gen, json.dumps(header).encode())
    assert keep_maps(store, OLD, gen, {p: (KINDS[p], MAPS[p]) for p in KINDS})  # with holds
    held = _token(store, OLD)
    assert [k for k, _ in store.derived_keys("thing:")] == [older, OLD]  # listed first
    served = stale_maps(store, "thing", NEW, gen, KINDS, _rebuilt([]))
    assert served is not None and served["names"]._token == held
    store.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_holds_what_it_reads_itself(tmp_path: Path) -> None:
    """Record locks are not inherited: a child forked while its parent held rows counts
    none of them, and holds what it reads itself (the parent's release does not drop it)."""
    store, gen, old = _two_versions(tmp_path)
    reading = read_maps(store, OLD, gen, KINDS, _rebuilt([]))
    assert reading is not None
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own store and hold, then wait (EOF: the parent is done)
        code = 1
        try:
            os.close(ready_r)
            os.close(go_w)
            mine = SQLiteStore(tmp_path / "k.db")
            found = read_maps(mine, OLD, gen, KINDS, _rebuilt([]))
            os.write(ready_w, b"1" if found is not None else b"0")
            os.read(go_r, 1)
            code = 0 if found is not None and found[0]["names"]["t.get"] == "t_get" else 2
        finally:
            os._exit(code)
    os.close(ready_w)
    os.close(go_r)
    try:
        assert os.read(ready_r, 1) == b"1"
        del reading
        gc.collect()  # the parent's hold released
        assert keep_maps(store, NEW, gen, {p: (KINDS[p], MAPS[p]) for p in KINDS})
        keys, rows, _ = _kept(tmp_path / "k.db")
        assert OLD in keys and old in rows  # the child holds them
        os.write(go_w, b"1")
    finally:
        os.close(ready_r)
        os.close(go_w)  # the child reads EOF and ends, whatever happened here
        status = os.waitpid(pid, 0)[1]
    assert status == 0
    store.drop_superseded(NEW, gen)
    keys, rows, _ = _kept(tmp_path / "k.db")
    assert keys == {NEW} and old not in rows
    store.close()


def test_a_release_from_the_collector_inside_the_holds_lock_waits_for_nothing(
    tmp_path: Path,
) -> None:
    """A hold is released by a finalizer, which the collector may run at any allocation —
    also while this thread is inside the holds' own critical section: the release then
    never waits for the lock (it would wait for itself), and is given up by the next
    hold or removal."""
    catalog = str(tmp_path / "k.db")
    release = sqlite_holds.hold(catalog, "tok")
    assert release is not None
    done = threading.Event()

    def inside() -> None:
        with sqlite_holds._LOCK:  # as if the collector ran here
            release()
        done.set()

    worker = threading.Thread(target=inside, daemon=True)
    worker.start()
    worker.join(30)
    assert done.is_set()  # did not wait for itself
    removing = sqlite_holds.unread(catalog, "tok")  # the release given up first
    assert removing is not None
    assert sqlite_holds.hold(catalog, "tok") is None  # being removed: not read
    removing()
    again = sqlite_holds.hold(catalog, "tok")
    assert again is not None
    again()
