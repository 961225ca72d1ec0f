"""A request's keys of a map read per key from the store, read in one store read
(discovery/kept.py ``read_ahead``): its exact mentions (discovery/query.py), the ranker's
overlap features (discovery/search.py ``read_features_ahead``) and its terms' document
counts (the SQLite vocabulary) no longer ask the store once per key."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from support import embedder, spec
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.features import features
from toolscout.discovery.kept import (
    KIND_FLAG,
    KIND_SET,
    KeptMap,
    KeptSet,
    keep_maps,
    read_ahead,
    read_maps,
)
from toolscout.discovery.lexical import terms
from toolscout.discovery.search import PhraseIndex, parse_query, read_features_ahead
from toolscout.policy import Principal
from toolscout.settings import SearchSettings
from toolscout.stores.base import Hits
from toolscout.stores.sqlite import SQLiteStore

KINDS = {"sets": KIND_SET, "flags": KIND_FLAG}
MAPS: dict[str, Any] = {
    "sets": {"a": frozenset({"x", "y"}), "b": frozenset(), "c": frozenset({"z"})},
    "flags": frozenset({"find", "get"}),
}


def _spy(store: SQLiteStore) -> Counter[str]:
    """Counts the store's reads of kept rows, by part (the real reads still run)."""
    reads: Counter[str] = Counter()
    real = store.derived_rows

    def derived_rows(token: str, part: str, names: Sequence[str]) -> dict[str, str]:
        reads[part] += 1
        return real(token, part, names)

    store.derived_rows = derived_rows  # type: ignore[method-assign]
    return reads


def _kept(tmp_path: Path, rebuilt: list[str]) -> tuple[SQLiteStore, dict[str, Any]]:
    store = SQLiteStore(tmp_path / "k.db")
    gen = store.generation()
    assert keep_maps(store, "k", gen, {p: (KINDS[p], MAPS[p]) for p in KINDS})

    def rebuild(part: str) -> Any:
        rebuilt.append(part)
        return MAPS[part]

    found = read_maps(store, "k", gen, KINDS, rebuild)
    assert found is not None
    return store, found[0]


def test_read_ahead_holds_a_maps_new_keys_after_one_store_read(tmp_path: Path) -> None:
    rebuilt: list[str] = []
    store, maps = _kept(tmp_path, rebuilt)
    sets, flags = maps["sets"], maps["flags"]
    assert isinstance(sets, KeptMap) and isinstance(flags, KeptSet)
    reads = _spy(store)
    read_ahead(sets, ["a", "zz", "b", "a"])
    read_ahead(flags, ["find", "other"])
    assert reads == {"sets": 1, "flags": 1}
    # held: answered without another read, the same values as read one key at a time
    assert sets["a"] == frozenset({"x", "y"}) and sets["b"] == frozenset()
    assert sets.get("zz") is None and "zz" not in sets
    assert "find" in flags and "other" not in flags
    assert reads == {"sets": 1, "flags": 1}
    read_ahead(sets, ["a", "b"])  # every key held: nothing read
    assert reads == {"sets": 1, "flags": 1}
    assert sets["c"] == frozenset({"z"}) and reads["sets"] == 2  # a key not read ahead
    read_ahead({"a": 1}, ["a"])  # a plain mapping holds everything: nothing to do
    assert rebuilt == []
    store.close()


def test_read_ahead_of_a_damaged_part_builds_it_again(tmp_path: Path) -> None:
    rebuilt: list[str] = []
    store, maps = _kept(tmp_path, rebuilt)
    db = sqlite3.connect(tmp_path / "k.db")
    with db:
        db.execute("UPDATE derived_rows SET value = '[1, 2]' WHERE part = 'sets' AND name = 'a'")
    db.close()
    read_ahead(maps["sets"], ["b", "a"])
    assert rebuilt == ["sets"]
    assert maps["sets"]["a"] == frozenset({"x", "y"}) and maps["sets"]["b"] == frozenset()
    store.close()


def _tools() -> list[Any]:
    return [
        spec(
            f"svc{i}.find_order_{i}",
            f"Find an order of kind {i} by its number.",
            aliases=[f"look up order number {i}", f"order lookup {i} please"],
        )
        for i in range(12)
    ]


TEXT = (
    "please look up order number 7 and then svc3.find_order_3, or findOrder for order "
    "lookup 5 please, then find an order by number"
)


def test_a_requests_exact_mentions_take_one_store_read_a_table(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Catalog.open(db, embedder=embedder()) as first:
        first.add(_tools())
        first.phrases()
    built = PhraseIndex(_tools(), {})
    allowed = frozenset(t.id for t in _tools())
    with Catalog.open(db, embedder=embedder()) as second:
        index = second.phrases()
        assert isinstance(index.phrases, KeptMap)  # read per key from the kept rows
        reads = _spy(second.store)  # type: ignore[arg-type]
        found = index.find(TEXT, allowed)
        assert found == built.find(TEXT, allowed)
        assert list(found) == list(built.find(TEXT, allowed))  # in the order found
        assert {"svc7.find_order_7", "svc3.find_order_3", "svc5.find_order_5"} <= set(found)
        # one read each of the identifiers, the phrase starts and the phrases; one a key
        # before (the text's words and every phrase of up to 8 words from a start)
        assert reads == {"identifiers": 1, "starts": 1, "phrases": 1}


def test_the_rankers_overlap_features_read_ahead_then_nothing_more(tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    with Catalog.open(db, embedder=embedder()) as first:
        first.add(_tools())
        first.phrases()
    query = terms("find the order kind number 4 by lookup")
    ids = [t.id for t in _tools()]
    lex = Hits(ids[:6], [6.0, 5.0, 4.0, 3.0, 2.0, 1.0])
    dense = Hits(ids[3:9], [0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    with Catalog.open(db, embedder=embedder()) as plain:  # read one key at a time
        index = plain.phrases()
        want_ids, want = features(query, lex, dense, index.fields, index.idf)
    with Catalog.open(db, embedder=embedder()) as second:
        index = second.phrases()
        kept = index.fields
        assert isinstance(kept.in_name, KeptMap) and isinstance(kept.name, KeptMap)
        reads = _spy(second.store)  # type: ignore[arg-type]
        read_features_ahead(kept, query, (*lex.ids, *dense.ids))  # the pool
        assert reads == {"in_name": 1, "in_summary": 1, "name": 1}
        got_ids, got = features(query, lex, dense, kept, index.idf)
        # what the features read of a kept catalog was all read ahead
        assert reads == {"in_name": 1, "in_summary": 1, "name": 1}
        assert got_ids == want_ids and np.array_equal(got, want)
        assert got[:, 5].any() and got[:, 6].any()  # the overlap columns were read


def test_a_requests_terms_are_counted_in_one_read_of_the_vocabulary(tmp_path: Path) -> None:
    db = tmp_path / "v.db"
    with Catalog.open(db, embedder=embedder()) as first:
        first.add(_tools())
    text = "find the order kind number 4 by lookup, zebra quokka"
    plain = SQLiteStore(db)  # read term by term (get)
    df, n_docs = plain.document_frequency()
    want = parse_query(text, df, n_docs, SearchSettings())
    counts = {t: df.get(t, 0) for t in terms(text)}
    plain.close()
    store = SQLiteStore(db)
    df, n_docs = store.document_frequency()
    asked: list[str] = []
    store._db.set_trace_callback(asked.append)
    got = parse_query(text, df, n_docs, SearchSettings())
    vocab = [sql for sql in asked if "tool_vocab" in sql]
    assert len(vocab) == 1 and " IN (" in vocab[0]
    assert got == want
    assert {t: df.get(t, 0) for t in terms(text)} == counts
    assert counts["order"] == 12 and counts["quokka"] == 0
    assert len([sql for sql in asked if "tool_vocab" in sql]) == 1  # all held
    store.close()


def test_a_discovery_reads_the_overlap_features_keys_ahead(tmp_path: Path) -> None:
    """Through ``Catalog.discover`` (not only ``read_features_ahead`` called by hand): a
    new request's ranking reads each overlap table of a kept catalog at most once."""
    db = tmp_path / "d.db"
    with Catalog.open(db, embedder=embedder()) as first:
        first.add(_tools())
        first.phrases()
    caller = Principal.of("p", "t1", scopes=[])
    with Catalog.open(db, embedder=embedder()) as second:
        index = second.phrases()
        assert isinstance(index.fields.in_name, KeptMap)
        reads = _spy(second.store)  # type: ignore[arg-type]
        ids = second.discover(
            "find the order of kind 4 by its number", caller, tier="progressive"
        ).ids
        assert ids and "svc4.find_order_4" in ids
        assert reads["in_name"] == 1 and reads["in_summary"] == 1 and reads["name"] <= 1
