"""Derived state kept by another version of toolscout (its key names other code): a new
version answers from it at once and derives its own in the background, instead of
deriving the phrase index, name table and finder index on its first request (20 s at
100k tools)."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from support import embedder
from test_kept import KINDS, MAPS, PEOPLE, QUERIES, _store, _tools, first_process
from toolscout.discovery import derived, keptparts
from toolscout.discovery.catalog import Catalog, _kept_key
from toolscout.discovery.kept import KeptMap, keep_maps, read_maps, stale_maps
from toolscout.stores.sqlite import SQLiteStore

BUILDERS = ("_phrase_parts", "_name_parts", "_finder_parts")


def _watch_builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(builder, thread) of every derived structure built from the cards from now on."""
    built: list[tuple[str, str]] = []
    for name in BUILDERS:
        real = getattr(derived, name)

        def watched(*args: Any, _real: Any = real, _name: str = name) -> Any:
            built.append((_name, threading.current_thread().name))
            return _real(*args)

        monkeypatch.setattr(derived, name, watched)
    return built


def _upgrade(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a new toolscout release is to the kept rows: its modules' digest differs."""
    other = dict.fromkeys(keptparts.BUILDERS, "another-version0")
    monkeypatch.setattr(keptparts, "_DIGESTS", other)


def test_an_upgrade_answers_from_the_older_rows_and_derives_its_own_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "c.db"
    asked, names, index = first_process(db)  # the older version's process
    phrases, fields = index.phrases, index.fields
    _upgrade(monkeypatch)
    built = _watch_builds(monkeypatch)
    with Catalog.open(db, embedder=embedder()) as new:
        answered = [new.discover(q, p).ids for q in QUERIES for p in PEOPLE]
        on_request = [b for b in built if b[1] == threading.main_thread().name]
        new.wait_kept()
        assert on_request == []  # nothing derived while answering
        assert sorted(built) == sorted((b, "toolscout-rederive") for b in BUILDERS)
        assert answered == asked
        state = new.refresh()
        assert state.stale == set()
        fresh = new.phrases()
        assert not isinstance(fresh.fields.name, KeptMap)  # the one derived behind
        assert fresh.phrases == phrases and fresh.fields == fields
        assert dict(new.names()) == names and new.resolve("svc2_find_order_2")
        assert [new.discover(q, p).ids for q in QUERIES for p in PEOPLE] == asked
    store = SQLiteStore(db)
    for name in ("phrase-index", "name-table", "finder-index"):  # kept under the new key
        kept = store.derived(_kept_key(name))
        assert kept is not None and kept[0] == store.generation()
    store.close()
    built.clear()
    with Catalog.open(db, embedder=embedder()) as again:  # the new version's next process
        assert [again.discover(q, p).ids for q in QUERIES for p in PEOPLE] == asked
        again.finders()
        again.wait_kept()
        assert built == [] and again.refresh().stale == set()


def test_without_rows_of_any_version_the_first_request_derives_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A written generation (or a first start): nothing is kept for it, so nothing stale
    is served; the request derives, as before."""
    db = tmp_path / "c.db"
    built = _watch_builds(monkeypatch)
    with Catalog.open(db, embedder=embedder()) as cat:
        cat.add(_tools())
        cat.discover(QUERIES[0], PEOPLE[0])
        cat.finders()
        assert {thread for _, thread in built} == {threading.main_thread().name}
        assert cat.refresh().stale == set()


def test_stale_rows_are_served_only_for_this_generation_and_these_parts(tmp_path: Path) -> None:
    store = _store(tmp_path)
    gen = store.generation()
    maps = {p: (KINDS[p], MAPS[p]) for p in KINDS}
    keep_maps(store, "thing:old", gen, maps)

    def rebuild(part: str) -> Any:
        raise AssertionError(part)

    found = stale_maps(store, "thing", "thing:new", gen, KINDS, rebuild)
    assert found is not None and dict(found["names"]) == MAPS["names"]
    assert stale_maps(store, "thing", "thing:old", gen, KINDS, rebuild) is None  # its own
    assert stale_maps(store, "thing", "thing:new", gen + 1, KINDS, rebuild) is None
    other = {**KINDS, "more": KINDS["names"]}
    assert stale_maps(store, "thing", "thing:new", gen, other, rebuild) is None
    assert stale_maps(store, "thin", "thin:new", gen, KINDS, rebuild) is None  # not a prefix
    assert store.derived_keys("thing:") == [("thing:old", gen)]
    store.close()


def _tokens(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {t for (t,) in conn.execute("SELECT DISTINCT token FROM derived_rows")}
    finally:
        conn.close()


def _token(store: SQLiteStore, key: str) -> str:
    kept = store.derived(key)
    assert kept is not None
    return str(json.loads(kept[1])["token"])


@pytest.mark.parametrize("in_steps", [False, True])
def test_rows_another_version_kept_for_an_older_generation_are_removed(
    tmp_path: Path, in_steps: bool
) -> None:
    """An upgrade used to leave its predecessor's rows behind for good (~80 MB a version at
    100k tools): once this version keeps a map for a newer generation, what another
    version kept of the same map for an older one goes; what it kept for the current
    generation (a rolling upgrade's older processes read it) and other maps stay."""
    db = tmp_path / "c.db"
    with Catalog.open(db, embedder=embedder()) as cat:
        cat.add(_tools())
    store = SQLiteStore(db)
    gen = store.generation()
    maps = {p: (KINDS[p], MAPS[p]) for p in KINDS}
    assert keep_maps(store, "thing:old", gen, maps)
    assert keep_maps(store, "other:old", gen, maps)
    old, other = _token(store, "thing:old"), _token(store, "other:old")
    reading = read_maps(store, "thing:old", gen, KINDS, _never)  # an older process reads them
    assert keep_maps(store, "thing:new", gen, maps, in_steps=in_steps)
    assert {old, other} <= _tokens(db)  # the same generation: the older version's rows stay
    assert reading is not None
    assert stale_maps(store, "thing", "thing:new", gen, KINDS, _never) is not None
    assert store.delete(["svc1.find_order_1"]) == 1  # a catalog write: a newer generation
    newer = store.generation()
    assert newer > gen
    assert keep_maps(store, "thing:new", newer, maps, in_steps=in_steps)
    assert store.derived_keys("thing:") == [("thing:new", newer)]
    assert store.derived_keys("other:") == [("other:old", gen)]  # another map: untouched
    tokens = _tokens(db)
    assert old not in tokens and other in tokens and _token(store, "thing:new") in tokens
    found = read_maps(store, "thing:new", newer, KINDS, _never)
    assert found is not None and dict(found[0]["names"]) == MAPS["names"]
    store.close()


def _never(part: str) -> Any:
    raise AssertionError(part)


def test_blobs_another_version_kept_for_an_older_generation_are_removed(tmp_path: Path) -> None:
    """Token counts and the crosslingual lexicon (~9 MB on metatool) are blobs under
    ``name:digest`` keys: an upgrade used to leave its predecessor's behind for good. A
    key that does not end in a code digest (the dense header's ends in its model) stays."""
    db = tmp_path / "c.db"
    with Catalog.open(db, embedder=embedder()) as cat:
        cat.add(_tools())
    store = SQLiteStore(db)
    gen = store.generation()
    old, new = "tool-tokens:" + "a" * 16, "tool-tokens:" + "b" * 16
    dense_a, dense_b = "dense-index:9:model-a", "dense-index:9:model-b"
    for key in (old, dense_a):
        assert store.set_derived(key, gen, b"older")
    assert store.set_derived(new, gen, b"newer")
    assert store.derived(old) == (gen, b"older")  # the same generation: a rolling upgrade's
    assert store.delete(["svc1.find_order_1"]) == 1
    newer = store.generation()
    for key in (new, dense_b):
        assert store.set_derived(key, newer, b"newer")
    assert store.derived_keys("tool-tokens:") == [(new, newer)]
    assert store.derived(dense_a) == (gen, b"older")
    store.close()
