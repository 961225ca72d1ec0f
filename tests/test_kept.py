"""Derived state kept as rows read per key, and cards read on demand (discovery/kept.py,
discovery/cardtable.py): a new process reads only what it asks for, and a damaged or
foreign kept map is never used (built again from the catalog)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from support import embedder, spec
from toolscout.discovery.cardtable import CardTable
from toolscout.discovery.catalog import Catalog, _kept_key
from toolscout.discovery.kept import (
    KIND_FLAG,
    KIND_PAIRS,
    KIND_SET,
    KIND_STR,
    KeptMap,
    keep_maps,
    read_maps,
)
from toolscout.discovery.search import PhraseIndex
from toolscout.errors import StoreError
from toolscout.policy import Principal, TenantIndex, entitle
from toolscout.stores import sqlite_derived
from toolscout.stores.sqlite import SQLiteStore

KINDS = {"sets": KIND_SET, "pairs": KIND_PAIRS, "names": KIND_STR, "flags": KIND_FLAG}
MAPS: dict[str, Any] = {
    "sets": {"a": frozenset({"x", "y"}), "b": frozenset(), "é": frozenset({"ü"})},
    "pairs": {"find order": [("t.find", "name"), ("t.get", "alias")]},
    "names": {"t.find": "t_find", "t.get": "t_get"},
    "flags": frozenset({"find", "get"}),
}


def _store(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(tmp_path / "k.db")


def _rebuilt(log: list[str]) -> Any:
    def rebuild(part: str) -> Any:
        log.append(part)
        return MAPS[part]

    return rebuild


def test_kept_maps_are_read_back_per_key(tmp_path: Path) -> None:
    store = _store(tmp_path)
    gen = store.generation()
    assert keep_maps(store, "k", gen, {p: (KINDS[p], MAPS[p]) for p in KINDS})
    log: list[str] = []
    found = read_maps(store, "k", gen, KINDS, _rebuilt(log))
    assert found is not None
    maps = found[0]
    assert maps["sets"]["a"] == frozenset({"x", "y"}) and maps["sets"].get("zz") is None
    assert maps["pairs"]["find order"] == [("t.find", "name"), ("t.get", "alias")]
    assert "find" in maps["flags"] and "other" not in maps["flags"]
    assert maps["names"].get("t.get") == "t_get" and "t.nope" not in maps["names"]
    for part in KINDS:  # whole, as built (also iteration and length)
        assert maps[part] == MAPS[part] and len(maps[part]) == len(MAPS[part])
    assert dict(maps["names"]) == MAPS["names"] and list(maps["names"]) == ["t.find", "t.get"]
    assert log == []  # nothing rebuilt
    assert read_maps(store, "k", gen + 1, KINDS, _rebuilt(log)) is None  # another generation
    assert read_maps(store, "k", gen, {"sets": KIND_SET}, _rebuilt(log)) is None  # other parts
    assert not keep_maps(store, "k", gen + 1, {})  # not the current generation: not written


def _rows(db_path: Path) -> list[tuple[str, str, str, int, str]]:
    db = sqlite3.connect(db_path)
    try:
        return db.execute("SELECT token, part, name, pos, value FROM derived_rows").fetchall()
    finally:
        db.close()


def test_maps_kept_in_steps_read_back_as_kept_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The background writer's way (many short transactions, step=1 here) keeps the same
    rows; the rows of the header it replaces go; a moved generation writes nothing and
    leaves none of its rows behind."""
    store = _store(tmp_path)
    gen = store.generation()
    maps = {p: (KINDS[p], MAPS[p]) for p in KINDS}
    assert keep_maps(store, "k", gen, maps)
    once = {(part, name, pos, value) for _, part, name, pos, value in _rows(tmp_path / "k.db")}
    monkeypatch.setattr(sqlite_derived, "DERIVED_STEP", 1)
    assert keep_maps(store, "k", gen, maps, in_steps=True)
    rows = _rows(tmp_path / "k.db")
    assert {(part, name, pos, value) for _, part, name, pos, value in rows} == once
    assert len({token for token, *_ in rows}) == 1  # the replaced header's rows are gone
    log: list[str] = []
    found = read_maps(store, "k", gen, KINDS, _rebuilt(log))
    assert found is not None and dict(found[0]["names"]) == MAPS["names"] and log == []
    assert not keep_maps(store, "k", gen + 1, maps, in_steps=True)  # not current
    assert _rows(tmp_path / "k.db") == rows  # nothing of it left
    store.close()


def test_a_catalog_keeps_derived_state_on_a_second_connection(tmp_path: Path) -> None:
    """The first process after a write answers before its derived state is written; the
    write goes through another connection and is done when the catalog closes."""
    db = tmp_path / "bg.db"
    with Catalog.open(db, embedder=embedder()) as cat:
        cat.add(_tools())
        cat.discover(QUERIES[0], Principal.of("p", "t1", scopes=["orders:*"]))
        names = dict(cat.names())
        cat.finders()
    store = SQLiteStore(db)
    for name in ("phrase-index", "name-table", "finder-index"):
        kept = store.derived(_kept_key(name))
        assert kept is not None and kept[0] == store.generation()
    with Catalog.open(db, embedder=embedder()) as again:
        assert again.store.second_connection() is not None  # type: ignore[attr-defined]
        assert dict(again.names()) == names
    assert SQLiteStore(":memory:").second_connection() is None
    store.close()


def test_derived_state_is_kept_in_line_when_no_second_connection_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: SQLiteStore) -> SQLiteStore:
        raise StoreError(f"cannot open the store at {self.path}: refused")

    monkeypatch.setattr(SQLiteStore, "second_connection", refuse)
    with Catalog.open(tmp_path / "one.db", embedder=embedder()) as cat:
        cat.add(_tools())
        names = dict(cat.names())  # answered, and kept before returning
        assert cat._keeping == []
        kept = cat.store.derived(_kept_key("name-table"))  # type: ignore[attr-defined]
        assert kept is not None and kept[0] == cat.generation
    assert names


def test_a_damaged_kept_map_is_built_again_never_used(tmp_path: Path) -> None:
    store = _store(tmp_path)
    gen = store.generation()
    keep_maps(store, "k", gen, {p: (KINDS[p], MAPS[p]) for p in KINDS})
    db = sqlite3.connect(tmp_path / "k.db")
    with db:  # one row lost, one row not its kind, one row not JSON
        db.execute("DELETE FROM derived_rows WHERE part = 'names' AND name = 't.get'")
        db.execute("UPDATE derived_rows SET value = '[1, 2]' WHERE part = 'sets' AND name = 'a'")
        db.execute("UPDATE derived_rows SET value = '[[' WHERE part = 'pairs'")
    db.close()
    log: list[str] = []
    found = read_maps(store, "k", gen, KINDS, _rebuilt(log))
    assert found is not None
    maps = found[0]
    assert maps["names"].get("t.get") == "t_get"  # the count differs: rebuilt whole
    assert maps["sets"]["a"] == frozenset({"x", "y"})  # the row does not decode: rebuilt
    assert maps["pairs"]["find order"] == MAPS["pairs"]["find order"]
    assert maps["flags"] == MAPS["flags"]  # an intact part is read as kept
    assert sorted(log) == ["names", "pairs", "sets"]
    store.set_derived("k", gen, b"\x80not json")
    assert read_maps(store, "k", gen, KINDS, _rebuilt(log)) is None
    store.set_derived("k", gen, b'{"token": "t", "counts": {"sets": -1}, "extra": {}}')
    assert read_maps(store, "k", gen, KINDS, _rebuilt(log)) is None
    store.close()


def _tools() -> list[Any]:
    out = []
    for i in range(12):
        tenants = [] if i % 4 == 0 else [f"t{i % 3}"] if i % 4 != 3 else ["t1", "t2"]
        scopes = ["orders:read"] if i % 2 else ["billing:admin"]
        out.append(
            spec(
                f"svc{i}.find_order_{i}",
                f"Find an order of kind {i}.",
                tenants=tenants,
                scopes=scopes,
                risk="admin" if i % 5 == 0 else "read",
                aliases=[f"look up order number {i}"],
            )
        )
    return out


QUERIES = ["svc3.find_order_3 please", "look up order number 7", "find an order"]


PEOPLE = [Principal.of(f"p{t}", t, scopes=["orders:*", "billing:*"]) for t in ("t0", "t1", "")]


def first_process(db: Path) -> tuple[list[list[str]], dict[str, str], PhraseIndex]:
    """A first process over a new catalog at ``db``: the tools added, the finders derived
    and every query asked by each of :data:`PEOPLE`; what it answered, its names and its
    phrase index."""
    with Catalog.open(db, embedder=embedder()) as first:
        first.add(_tools())
        first.finders()
        asked = [first.discover(q, p).ids for q in QUERIES for p in PEOPLE]
        return asked, dict(first.names()), first.phrases()


def test_a_new_process_reads_derived_state_per_key_and_cards_on_demand(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    asked, names, built = first_process(db)
    with Catalog.open(db, embedder=embedder()) as second:
        state = second.refresh()
        assert [second.discover(q, p).ids for q in QUERIES for p in PEOPLE] == asked
        index = second.phrases()
        assert isinstance(index.fields.name, KeptMap)  # read per key, not built
        assert isinstance(second.finders().name_terms, KeptMap)
        assert state.table._all is None  # no discovery needed every card
        assert index.phrases == built.phrases and index.fields == built.fields
        assert dict(second.names()) == names and second.resolve("svc2_find_order_2")
        assert second.card("svc5.find_order_5") == _tools()[5].card
        assert second.card("svc.none") is None and "svc.none" not in state.by_id
        assert len(second) == 12 and state.table._all is None
        assert [c.id for c in second.cards()] == [s.id for s in _tools()]


def test_a_tenants_share_read_from_the_store_entitles_as_every_card_does(tmp_path: Path) -> None:
    with Catalog(SQLiteStore(tmp_path / "s.db"), embedder=embedder()) as cat:
        cat.add(_tools())
        policy = cat.policy
    store = SQLiteStore(tmp_path / "s.db")
    table = CardTable(store)
    share = table.share()
    assert share is not None
    cards = [s.card for s in _tools()]
    lazy = TenantIndex(share=share, total=len(table))
    for tenant in ("t0", "t1", "t2", "", "unknown", "all"):
        for who in (
            Principal.of("a", tenant, scopes=["orders:read"]),
            Principal.of("b", tenant, scopes=["*"]),
            Principal.of("c", tenant, scopes=["*", "toolscout:admin"]),
        ):
            plain, fast = entitle(cards, who, policy), entitle(lazy, who, policy)
            assert [c.id for c in fast.allowed] == [c.id for c in plain.allowed]
            assert dict(fast.denied) == dict(plain.denied) and fast.ids == plain.ids
    assert table._all is None
    store.close()


def test_a_tenants_share_read_with_its_cards_is_the_share_then_its_cards(tmp_path: Path) -> None:
    with Catalog(SQLiteStore(tmp_path / "s.db"), embedder=embedder()) as cat:
        cat.add(_tools())
    store = SQLiteStore(tmp_path / "s.db")
    for tenant in ("t0", "t1", "", "unknown"):
        ids = store.tenant_share(tenant)
        rows = store.tenant_cards(tenant)
        assert [t for t, _ in rows] == ids
        assert dict(rows) == store.cards_of(ids)
        held = set(ids[::2])
        assert [t for t, c in store.tenant_cards(tenant, held) if c is None] == ids[::2]
    table = CardTable(store)
    share = table.share()
    assert share is not None
    first = share("t1")
    again = share("t2")  # the shared cards are held: handed out again as the same objects
    shared = {c.id: c for c in first if not c.tenants}
    assert shared and all(c is shared[c.id] for c in again if c.id in shared)
    assert table.get(first[0].id) is first[0] and table._all is None
    store.close()


def test_the_kept_key_names_the_code_that_builds_it() -> None:
    assert _kept_key("phrase-index") != _kept_key("name-table")
    assert _kept_key("phrase-index").startswith("phrase-index:")


def test_the_kept_key_reads_the_builders_and_the_field_terms(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The builders live in ``discovery/keptparts.py``, the field terms in ``features.py``
    and the phrase index in ``query.py`` (split out of catalog.py, calibrate.py and
    search.py): a change to any of them must change the key; the ranking's modules do not."""
    from toolscout.discovery import derived, keptparts

    read: list[str] = []
    real = Path.read_bytes

    def recording(self: Path) -> bytes:
        read.append(self.name)
        return real(self)

    monkeypatch.setattr(keptparts, "_DIGESTS", {})
    monkeypatch.setattr(Path, "read_bytes", recording)
    derived._kept_key("phrase-index")
    assert {"keptparts.py", "features.py", "lexical.py", "kept.py", "query.py"} <= set(read)
    assert not {"search.py", "fusion.py", "derived.py"} & set(read)
    assert Path(str(sys.modules[PhraseIndex.__module__].__file__)).name in read


def test_the_vocabulary_read_per_term_is_the_whole_one(tmp_path: Path) -> None:
    with Catalog(SQLiteStore(tmp_path / "v.db"), embedder=embedder()) as cat:
        cat.add(_tools())
    store = SQLiteStore(tmp_path / "v.db")
    lazy, n = store.document_frequency()
    probe = ["order", "find", "kind", "3", "absent", "zzscopeall", "zzscope7430"]
    asked = {t: lazy.get(t, 0) for t in probe}
    whole = dict(lazy)  # iterating reads it whole
    assert n == 12 and asked == {t: whole.get(t, 0) for t in probe}
    assert asked["order"] == 12 and asked["absent"] == 0 and asked["zzscopeall"] == 0
    assert not any(t.startswith("zzscope") for t in whole)
    store.close()
