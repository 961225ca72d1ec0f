"""Each kept part is keyed by the code that builds it (discovery/keptparts.py): a release
that changes the ranking (search.py) reads what an earlier one kept; one that changes a
part's builders derives that part again, after its first answer, and only that part."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support import embedder
from test_kept import PEOPLE, QUERIES, _tools, first_process
from toolscout.discovery import derived, keptparts, rederiving
from toolscout.discovery.catalog import Catalog, _kept_key
from toolscout.discovery.kept import KIND_STR, KeptMap, differing, keep_maps, read_maps
from toolscout.stores.sqlite import SQLiteStore

PARTS = ("phrase-index", "name-table", "finder-index")
BUILD_FUNCTIONS = ("_phrase_parts", "_name_parts", "_finder_parts")
PACKAGE = Path(derived.__file__).resolve().parents[1]  # .../toolscout


def _module_file(module: str) -> str:
    return str(Path(sys.modules[module].__file__ or "").resolve())


def _keys_with(monkeypatch: pytest.MonkeyPatch, changed: str | None) -> dict[str, str]:
    """Every part's key as a release whose ``changed`` module (a file name under
    toolscout/) has one more line computes it."""
    real = Path.read_bytes

    def read(self: Path) -> bytes:
        data = real(self)
        if changed is not None and str(self.resolve()) == str(PACKAGE / changed):
            return data + b"\n# a release's change\n"
        return data

    with monkeypatch.context() as m:
        m.setattr(Path, "read_bytes", read)
        m.setattr(keptparts, "_DIGESTS", {})
        return {name: _kept_key(name) for name in PARTS}


def _relative(module: str) -> str:
    return str(Path(_module_file(module)).relative_to(PACKAGE))


def test_a_change_to_a_parts_builders_changes_its_key_and_only_theirs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = _keys_with(monkeypatch, None)
    assert base == {name: _kept_key(name) for name in PARTS}  # nothing else moves them
    every = {m for mods in keptparts.BUILDERS.values() for m in mods}
    for module in sorted(every):
        moved = _keys_with(monkeypatch, _relative(module))
        for name in PARTS:
            builds = module in keptparts.part_modules(name)
            assert (moved[name] != base[name]) == builds, (module, name)
    for other in ("discovery/search.py", "discovery/fusion.py", "discovery/derived.py",
                  "discovery/pipeline.py", "discovery/calibrate.py"):  # fmt: skip
        assert _keys_with(monkeypatch, other) == base, other


def _traced(call: Callable[[], Any]) -> set[str]:
    """The toolscout source files whose functions ``call`` ran (any depth)."""
    files: set[str] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            name = frame.f_code.co_filename
            if name.startswith(str(PACKAGE)):
                files.add(str(Path(name).resolve()))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return files


def test_each_builder_runs_only_code_its_key_names(tmp_path: Path) -> None:
    """A builder that calls into a module its part does not list (a function moved out of
    one, a new helper) would keep rows another version's different code made: the list
    must name every toolscout module a build runs. The cards are read before (the
    catalog's state, not the derivation)."""
    with Catalog.open(tmp_path / "c.db", embedder=embedder()) as cat:
        cat.add(_tools())
        read = cat.refresh()

        class Source:  # the generation's cards, read
            def __init__(self) -> None:
                self.cards = read.cards
                self.df = dict(read.df)

        state = Source()
        assert len(state.cards) == len(_tools())
        phrases = keptparts.phrase_parts(state)
        runs = {
            "phrase-index": lambda: keptparts.phrase_parts(state),
            "name-table": lambda: keptparts.name_parts(state),
            "finder-index": lambda: keptparts.finder_parts(phrases["name"]),
        }
        for name, run in runs.items():
            ran = _traced(run)
            listed = {_module_file(m) for m in keptparts.part_modules(name)}
            assert ran, name
            assert ran <= listed, (name, sorted(ran - listed))


def _watch_builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(builder, thread) of every part built in this process from now on."""
    built: list[tuple[str, str]] = []
    for name in BUILD_FUNCTIONS:
        real = getattr(derived, name)

        def watched(*args: Any, _real: Any = real, _name: str = name) -> Any:
            built.append((_name, threading.current_thread().name))
            return _real(*args)

        monkeypatch.setattr(derived, name, watched)
    return built


@pytest.fixture
def release(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Make this process a release whose module ``changed`` (under toolscout/) differs."""
    real = Path.read_bytes

    def change(changed: str) -> None:
        def read(self: Path) -> bytes:
            data = real(self)
            if str(self.resolve()) == str(PACKAGE / changed):
                return data + b"\n# a release's change\n"
            return data

        monkeypatch.setattr(Path, "read_bytes", read)
        monkeypatch.setattr(keptparts, "_DIGESTS", {})

    yield change


def test_a_release_that_changes_the_ranking_derives_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: Callable[[str], None]
) -> None:
    """Round sixteen's first process of a new release (search.py changed) answered after
    9.16 s at 100k tools: its key named search.py, so every part was another version's."""
    db = tmp_path / "c.db"
    asked, names, _ = first_process(db)
    release("discovery/search.py")
    built = _watch_builds(monkeypatch)
    with Catalog.open(db, embedder=embedder()) as new:
        assert [new.discover(q, p).ids for q in QUERIES for p in PEOPLE] == asked
        new.finders()
        assert dict(new.names()) == names
        state = new.refresh()
        assert state.stale == set() and not state.rederiving
        assert isinstance(new.phrases().fields.name, KeptMap)  # read, not built
        new.wait_kept()
    assert built == []


def test_a_release_that_changes_the_names_derives_only_the_name_table_after_answering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: Callable[[str], None]
) -> None:
    db = tmp_path / "c.db"
    asked, names, _ = first_process(db)
    release("discovery/inject.py")
    built = _watch_builds(monkeypatch)
    during: list[tuple[str, str]] = []
    with Catalog.open(db, embedder=embedder()) as new:
        first = new.discover(QUERIES[0], PEOPLE[0]).ids
        during.extend(built)  # what was built while the first discovery ran (none)
        rest = [new.discover(q, p).ids for q in QUERIES for p in PEOPLE][1:]
        new.wait_kept()
        assert [first, *rest] == asked
        assert new.refresh().stale == set()
        assert dict(new.names()) == names and new.resolve("svc2_find_order_2")
        store = SQLiteStore(db)
        kept = store.derived(_kept_key("name-table"))
        assert kept is not None and kept[0] == store.generation()
        store.close()
    assert during == []
    assert built == [("_name_parts", "toolscout-rederive")]


def test_the_parts_are_not_derived_again_beside_the_first_discovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: Callable[[str], None]
) -> None:
    """The first discovery of a release that found a part stale (the names, read to
    render its shortlist) waits a while before it returns: nothing is built meanwhile
    (f442ec3 built beside it, holding the interpreter against its reads: 9-11 s at 100k
    tools); it is built once the discovery has answered."""
    db = tmp_path / "c.db"
    asked, _, _ = first_process(db)
    release("discovery/inject.py")
    built = _watch_builds(monkeypatch)
    started = threading.Event()
    real_build = derived._name_parts

    def name_parts(state: Any) -> Any:
        started.set()
        return real_build(state)

    monkeypatch.setattr(derived, "_name_parts", name_parts)
    from toolscout.discovery import pipeline

    real_inject = pipeline.inject
    seen: list[bool] = []

    def inject(*args: Any, **kwargs: Any) -> Any:
        out = real_inject(*args, **kwargs)  # the stale names read, the rederive asked for
        seen.append(started.wait(1.0))  # a build beside this request starts now
        return out

    monkeypatch.setattr(pipeline, "inject", inject)
    with Catalog.open(db, embedder=embedder()) as new:
        assert new.discover(QUERIES[0], PEOPLE[0]).ids == asked[0]
        assert new.refresh().stale == {"name-table"}
        new.wait_kept()
        assert new.refresh().stale == set()
    assert seen == [False]
    assert started.is_set() and built == [("_name_parts", "toolscout-rederive")]


def test_a_large_catalog_derives_another_versions_parts_in_a_child_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From ``CHILD_FROM`` tools a child process builds and keeps them: the serving
    process builds nothing, and reads the child's rows in place of the stale ones."""
    db = tmp_path / "c.db"
    asked, names, index = first_process(db)
    store = SQLiteStore(db)  # what another version kept: the same rows under other keys
    for name in PARTS:
        store._db.execute(
            "UPDATE derived SET key = ? WHERE key = ?", (f"{name}:{'0' * 16}", _kept_key(name))
        )
    store.close()
    monkeypatch.setattr(rederiving, "CHILD_FROM", 0)
    children: list[bool] = []
    real_child = rederiving.derive_in_child

    def child(*args: Any) -> bool:
        children.append(real_child(*args))
        return children[-1]

    monkeypatch.setattr(rederiving, "derive_in_child", child)
    built = _watch_builds(monkeypatch)
    with Catalog.open(db, embedder=embedder()) as new:
        assert [new.discover(q, p).ids for q in QUERIES for p in PEOPLE] == asked
        assert new.refresh().stale  # served from the other version's rows
        new.wait_kept()
        state = new.refresh()
        assert children == [True] and state.stale == set()
        fresh = new.phrases()
        assert isinstance(fresh.fields.name, KeptMap)  # the child's rows, read per key
        assert fresh.phrases == index.phrases and fresh.fields == index.fields
        assert dict(new.names()) == names
        assert [new.discover(q, p).ids for q in QUERIES for p in PEOPLE] == asked
    assert built == []
    store = SQLiteStore(db)
    for name in PARTS:
        kept = store.derived(_kept_key(name))
        assert kept is not None and kept[0] == store.generation()
    store.close()


def test_a_child_of_other_code_refuses_and_the_thread_derives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child whose toolscout gives other keys (changed on disk meanwhile) keeps nothing
    under the caller's keys: the caller derives them on its thread."""
    db = tmp_path / "c.db"
    first_process(db)
    store = SQLiteStore(db)
    gen = store.generation()
    store.close()
    keys = {name: f"{name}:{'1' * 16}" for name in PARTS}
    assert not rederiving.derive_in_child(db, gen, keys)
    assert not rederiving.derive_in_child(db, gen + 1, {n: _kept_key(n) for n in PARTS})
    store = SQLiteStore(db)
    assert all(store.derived(key) is None for key in keys.values())
    store.close()


def test_a_name_the_stale_table_gave_another_tool_is_resolved_by_neither(
    tmp_path: Path,
) -> None:
    """Served from another version's name table, a shortlist shows that version's names;
    once this version's is in place, a name the two give different tools is refused (the
    model may have been shown either meaning), never run as the other tool."""
    db = tmp_path / "c.db"
    _, names, _ = first_process(db)
    a, b = "svc1.find_order_1", "svc2.find_order_2"
    older = {**names, a: names[b], b: names[a]}  # the older version named the two the other way
    store = SQLiteStore(db)
    gen = store.generation()
    store._db.execute("DELETE FROM derived WHERE key = ?", (_kept_key("name-table"),))
    assert keep_maps(store, f"name-table:{'0' * 16}", gen, {
        "names": (KIND_STR, older), "rendered": (KIND_STR, {n: t for t, n in older.items()}),
    })  # fmt: skip
    store.close()
    with Catalog.open(db, embedder=embedder()) as new:
        assert new.resolve(names[a]) == b  # the stale table: what a shortlist showed
        assert new.refresh().stale == {"name-table"}
        new.wait_kept()
        assert new.refresh().stale == set() and dict(new.names()) == names
        assert new.resolve(names[a]) is None and new.resolve(names[b]) is None
        assert new.resolve(a) == a  # the id itself is never ambiguous
        other = "svc5.find_order_5"
        assert new.resolve(names[other]) == other
    with Catalog.open(db, embedder=embedder()) as later:  # this version's names only
        assert later.resolve(names[a]) == a and later.resolve(names[b]) == b


def test_names_are_compared_inside_the_store_as_they_are_whole(tmp_path: Path) -> None:
    """At 100k names the comparison in Python held the interpreter ~1.2 s beside requests;
    two kept maps of one part are compared by one query on another connection instead."""
    db = tmp_path / "c.db"
    first_process(db)
    served = {"x": "a.x", "y": "a.y", "z": "a.z", "é": "a.é"}
    now = {"x": "a.x", "y": "b.y", "w": "a.w", "é": "a.é"}
    store = SQLiteStore(db)
    gen = store.generation()
    maps: dict[str, Any] = {}
    for key, m in (("n:served", served), ("n:now", now)):
        assert keep_maps(store, key, gen, {"rendered": (KIND_STR, m)})
        found = read_maps(store, key, gen, {"rendered": KIND_STR}, _never)
        assert found is not None
        maps[key] = found[0]["rendered"]
    opened: list[SQLiteStore] = []

    def side() -> SQLiteStore:
        opened.append(SQLiteStore(db))
        return opened[-1]

    assert differing(maps["n:served"], maps["n:now"], side) == {"y"}
    assert len(opened) == 1 and all(m._whole is None for m in maps.values())  # not read whole
    assert differing(served, now) == {"y"} == differing(maps["n:served"], now, side)
    store.close()


def _never(part: str) -> Any:
    raise AssertionError(part)


def test_no_child_from_an_interpreter_that_is_not_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An embedding server's ``sys.executable`` is its own binary: never run with ``-c``."""
    monkeypatch.setattr(sys, "executable", "/usr/bin/uwsgi")
    ran: list[Any] = []
    monkeypatch.setattr(rederiving.subprocess, "run", lambda *a, **k: ran.append(a))
    assert not rederiving.derive_in_child(tmp_path / "c.db", 1, {"name-table": "name-table:x"})
    assert ran == []
