from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support import spec
from toolscout.stores.base import IndexedTool
from toolscout.stores.sqlite import SQLiteStore


def _tool(tool_id: str, name_terms: str, vec_hash: str) -> IndexedTool:
    return IndexedTool(
        spec(tool_id), {"name": name_terms, "summary": name_terms}, [("card", vec_hash)]
    )


def _vec(*xs: float) -> np.ndarray:
    v = np.zeros(384, dtype=np.float32)
    v[: len(xs)] = xs
    return v / np.linalg.norm(v)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "t.db")
    s.upsert(
        [
            _tool("a.refund", "refund invoic", "h1"),
            _tool("a.order", "find order", "h2"),
            _tool("a.ship", "ship parcel order", "h3"),
        ],
        {"h1": _vec(1, 0), "h2": _vec(0, 1), "h3": _vec(0.2, 1)},
        model_id="m",
    )
    return s


def test_roundtrip_and_unchanged(store: SQLiteStore) -> None:
    assert [s.id for s in store.load()] == ["a.refund", "a.order", "a.ship"]
    stats = store.upsert([_tool("a.refund", "refund invoic", "h1")], {}, model_id="m")
    assert (stats.added, stats.updated, stats.unchanged) == (0, 0, 1)
    assert store.cached(["h1", "h2", "zz"], "m") == {"h1", "h2"}
    assert store.cached(["h1"], "other-model") == set()


def test_lexical_restricted_to_allowed(store: SQLiteStore) -> None:
    everything = frozenset({"a.refund", "a.order", "a.ship"})
    assert set(store.lexical(["order"], everything, 10).ids) == {"a.order", "a.ship"}
    assert store.lexical(["order"], frozenset({"a.ship"}), 10).ids == ["a.ship"]
    assert store.lexical(["order"], frozenset(), 10).ids == []
    assert store.lexical(['or"der'], everything, 10).ids == []  # quotes are escaped, not injected


def test_dense_restricted_to_allowed(store: SQLiteStore) -> None:
    q = _vec(0, 1)
    hits = store.dense(
        q, frozenset({"a.refund", "a.order", "a.ship"}), 2, kinds={"card"}, model_id="m"
    )
    assert hits.ids == ["a.order", "a.ship"]
    only = store.dense(q, frozenset({"a.refund"}), 5, kinds={"card"}, model_id="m")
    assert only.ids == ["a.refund"]
    assert store.dense(q, frozenset({"a.refund"}), 5, kinds={"alias"}, model_id="m").ids == []


def test_failed_upsert_rolls_back(store: SQLiteStore) -> None:
    bad = IndexedTool(spec("a.new"), {"nosuchfield": "x"}, [("card", "h9")])
    good = _tool("a.other", "other", "h8")

    class Boom(dict[str, np.ndarray]):
        def items(self):  # type: ignore[no-untyped-def]
            yield "h8", _vec(1)
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        store.upsert([good, bad], Boom(), model_id="m")
    assert [s.id for s in store.load()] == ["a.refund", "a.order", "a.ship"]
    assert store.cached(["h8"], "m") == set()


def test_replace_all_and_delete(store: SQLiteStore) -> None:
    stats = store.upsert([_tool("a.order", "find order", "h2")], {}, model_id="m", replace_all=True)
    assert stats.removed == 2
    assert [s.id for s in store.load()] == ["a.order"]
    assert store.lexical(["refund"], frozenset({"a.refund"}), 5).ids == []
    assert store.delete(["a.order", "missing"]) == 1
    assert store.load() == []


def test_document_frequency(store: SQLiteStore) -> None:
    df, n = store.document_frequency()
    assert n == 3 and df["order"] == 2 and df["refund"] == 1


def test_votes_rank_tools_by_their_nearest_learned_queries(store: SQLiteStore) -> None:
    order_texts = [("card", "h2"), ("learned", "l2"), ("learned", "l3")]
    learned = [
        IndexedTool(spec("a.refund"), {"name": "refund"}, [("card", "h1"), ("learned", "l1")]),
        IndexedTool(spec("a.order"), {"name": "order"}, order_texts),
    ]
    store.upsert(
        learned, {"l1": _vec(1, 0.1), "l2": _vec(0.9, 0.3), "l3": _vec(0.8, 0.4)}, model_id="m"
    )
    everything = frozenset({"a.refund", "a.order", "a.ship"})
    hits = store.votes(_vec(1, 0.2), everything, kind="learned", k=3, model_id="m")
    assert hits.ids == ["a.order", "a.refund"]  # two close neighbours outvote one closer
    only = store.votes(_vec(1, 0.2), frozenset({"a.refund"}), kind="learned", k=3, model_id="m")
    assert only.ids == ["a.refund"]
    assert store.votes(_vec(1, 0), everything, kind="nothing", k=3, model_id="m").ids == []
