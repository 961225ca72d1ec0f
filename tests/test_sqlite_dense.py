"""The SQLite store's dense index kept beside the file and memory-mapped by a new process."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from support import spec
from toolscout.stores.base import KIND_ALIAS, KIND_CARD, IndexedTool
from toolscout.stores.sqlite import SQLiteStore
from toolscout.stores.sqlite_dense import kept_key

MODEL = "test-model"


def _unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)


def _fill(store: SQLiteStore, n: int, *, offset: int = 0) -> None:
    """``n`` tools, each a card vector and an alias vector; every third shares its card
    text (and so its vector) with the tool before it, as tenants' copies do."""
    tools, vectors = [], {}
    for i in range(offset, offset + n):
        card = f"card-{i - 1 if i % 3 == 2 else i}"
        texts = [(KIND_CARD, card), (KIND_ALIAS, f"alias-{i}")]
        vectors[card] = _unit(int(card.split("-")[1]))
        vectors[f"alias-{i}"] = _unit(50_000 + i)
        tools.append(IndexedTool(spec(f"t.tool_{i}"), {"name": f"tool {i}"}, texts))
    store.upsert(tools, vectors, model_id=MODEL)


def _files(path: Path) -> list[Path]:
    return sorted(p for p in path.parent.iterdir() if ".dense-" in p.name)


def _search(store: SQLiteStore, seed: int) -> list[tuple[str, float]]:
    allowed = frozenset(f"t.tool_{i}" for i in range(0, 40, 2))
    hits = store.dense(_unit(seed), allowed, 10, kinds={KIND_CARD, KIND_ALIAS}, model_id=MODEL)
    return [(t, round(s, 6)) for t, s in zip(hits.ids, hits.scores, strict=True)]


def test_a_new_process_maps_the_dense_index_kept_for_its_generation(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    first = SQLiteStore(path)
    _fill(first, 40)
    expected = [_search(first, s) for s in range(5)]
    assert len(_files(path)) == 2  # the distinct vectors and the row map
    kept = first.derived(kept_key(MODEL))
    assert kept is not None and kept[0] == first.generation()
    card_vectors = first.card_vectors(["t.tool_3", "t.tool_4"], MODEL)
    first.close()

    second = SQLiteStore(path)
    index = second._dense_index(MODEL)
    assert isinstance(index.matrix, np.memmap)  # mapped, not read
    # tool 2's card shares tool 1's text: 40 cards + 40 aliases hold 67 distinct vectors
    assert index.matrix.shape == (67, 384)
    assert [_search(second, s) for s in range(5)] == expected
    again = second.card_vectors(["t.tool_3", "t.tool_4"], MODEL)
    assert all(np.array_equal(again[t], card_vectors[t]) for t in card_vectors)
    second.close()


def test_a_write_makes_the_next_process_build_and_keep_it_again(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    first = SQLiteStore(path)
    _fill(first, 30)
    _search(first, 1)
    old = _files(path)
    _fill(first, 10, offset=30)  # a write: the generation moves
    first.close()

    second = SQLiteStore(path)
    index = second._dense_index(MODEL)
    assert not isinstance(index.matrix, np.memmap)  # built, not the old generation's file
    assert len(index.ids) == 40
    new = _files(path)
    assert len(new) == 2 and not set(new) & set(old)  # the old files are gone
    expected = _search(second, 7)
    second.close()
    third = SQLiteStore(path)
    assert isinstance(third._dense_index(MODEL).matrix, np.memmap)
    assert _search(third, 7) == expected
    third.close()


@pytest.mark.parametrize("damage", ["truncated", "other shape", "header", "missing"])
def test_a_kept_index_that_is_not_what_its_header_says_is_rebuilt(
    tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "c.db"
    first = SQLiteStore(path)
    _fill(first, 20)
    expected = _search(first, 3)
    generation = first.generation()
    first.close()
    vectors = next(p for p in _files(path) if p.name.endswith(".vectors.npy"))
    if damage == "truncated":
        vectors.write_bytes(vectors.read_bytes()[:200])
    elif damage == "other shape":
        np.save(vectors, np.zeros((3, 384), dtype=np.float32))
    elif damage == "missing":
        vectors.unlink()
    else:  # a header naming another generation's file
        store = SQLiteStore(path)
        kept = store.derived(kept_key(MODEL))
        assert kept is not None
        header = json.loads(kept[1])
        header["generation"] = generation + 1
        assert store.set_derived(kept_key(MODEL), generation, json.dumps(header).encode())
        store.close()
    second = SQLiteStore(path)
    assert not isinstance(second._dense_index(MODEL).matrix, np.memmap)
    assert _search(second, 3) == expected
    second.close()


def test_an_in_memory_store_keeps_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = SQLiteStore(":memory:")
    _fill(store, 10)
    assert _search(store, 1)
    assert not list(tmp_path.iterdir())
    store.close()


def test_a_search_is_the_best_row_of_each_tool_and_appends_the_asked_ids(tmp_path: Path) -> None:
    """With one row a tool and with several, the hits are each allowed tool's best cosine,
    best first; ``also`` adds the allowed ids the hits lack, once each, in its order."""
    store = SQLiteStore(tmp_path / "t.db")
    _fill(store, 40)
    cards_only = SQLiteStore(tmp_path / "c.db")
    one_row = [
        IndexedTool(spec(f"t.tool_{i}"), {"name": f"tool {i}"}, [(KIND_CARD, f"c-{i}")])
        for i in range(40)
    ]
    cards_only.upsert(one_row, {f"c-{i}": _unit(i) for i in range(40)}, model_id=MODEL)
    allowed = frozenset(f"t.tool_{i}" for i in range(0, 40, 2))
    query = _unit(7)
    for s, kinds, rows in (
        (store, {KIND_CARD, KIND_ALIAS}, lambda i: [_unit(int(f"{i - 1 if i % 3 == 2 else i}")),
                                                    _unit(50_000 + i)]),
        (cards_only, {KIND_CARD}, lambda i: [_unit(i)]),
    ):  # fmt: skip
        best = {f"t.tool_{i}": max(float(v @ query) for v in rows(i)) for i in range(0, 40, 2)}
        want = sorted(best, key=lambda t: -best[t])
        also = [want[12], "t.tool_1", want[0], "nope", want[15], want[12]]
        hits = s.dense(query, allowed, 5, kinds=kinds, also=also, model_id=MODEL)
        assert hits.ids == [*want[:5], want[12], want[15]]
        assert hits.scores == pytest.approx([best[t] for t in hits.ids], abs=1e-6)
    store.close()
    cards_only.close()
