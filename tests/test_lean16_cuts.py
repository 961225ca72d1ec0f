"""Round twenty-two's same-answer cuts outside the encoder (h/lean16): the dense index's
extra hits when every tool is allowed and the discovery log's query hash keyed once."""

from __future__ import annotations

import hashlib
import hmac
import threading
from pathlib import Path

import numpy as np
import pytest

from support import spec
from toolscout.stores.base import KIND_ALIAS, KIND_CARD, IndexedTool
from toolscout.stores.sqlite import SQLiteStore
from toolscout.telemetry.log import DiscoveryLog, normalise_query

MODEL = "test-model"
N = 30


def _unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(16).astype(np.float32)
    return v / np.linalg.norm(v)


def _store(path: Path) -> tuple[SQLiteStore, dict[str, list[np.ndarray]]]:
    """``N`` tools, each a card vector; every other one an alias vector too."""
    store = SQLiteStore(path, dim=16)
    tools, vectors, rows = [], {}, {}
    for i in range(N):
        texts = [(KIND_CARD, f"card-{i}")]
        vectors[f"card-{i}"] = _unit(i)
        if i % 2:
            texts.append((KIND_ALIAS, f"alias-{i}"))
            vectors[f"alias-{i}"] = _unit(1000 + i)
        rows[f"t.tool_{i}"] = [vectors[name] for _, name in texts]
        tools.append(IndexedTool(spec(f"t.tool_{i}"), {"name": f"tool {i}"}, texts))
    store.upsert(tools, vectors, model_id=MODEL)
    return store, rows


@pytest.mark.parametrize("every", [True, False])
def test_the_lexical_lists_ids_are_added_with_their_best_rows_cosine(
    tmp_path: Path, every: bool
) -> None:
    """The ids of ``also`` the dense top lacks come after it, in ``also``'s order, each
    with its best row's cosine; an id outside the allowed set or the catalog, or already
    in the top, is not added. Every tool allowed takes the direct path, a share of them
    the searched one: both give what each tool's rows say."""
    store, rows = _store(tmp_path / "c.db")
    allowed = frozenset(rows) if every else frozenset(f"t.tool_{i}" for i in range(0, N, 3))
    query = _unit(77)
    also = ["t.tool_29", "nope", "t.tool_4", "t.tool_3", "t.tool_4", "t.tool_12", "t.tool_0"]
    hits = store.dense(query, allowed, 3, kinds={KIND_CARD, KIND_ALIAS}, also=also,
                       model_id=MODEL)  # fmt: skip
    index = store._dense_index(MODEL)
    assert index.subset(allowed, {KIND_CARD, KIND_ALIAS}).every_tool is every
    best = {t: max(float(v @ query) for v in vecs) for t, vecs in rows.items() if t in allowed}
    top = sorted(best, key=lambda t: -best[t])[:3]
    assert hits.ids[:3] == top
    extra = [t for t in dict.fromkeys(also) if t in best and t not in top]
    assert extra, "the case must add some ids"
    assert hits.ids == [*top, *extra]
    assert hits.scores == pytest.approx([best[t] for t in hits.ids], rel=1e-6)
    store.close()


def test_the_query_hash_is_the_keyed_digest_of_the_normalised_query(tmp_path: Path) -> None:
    log = DiscoveryLog(tmp_path / "log.db")
    texts = ["Find  my ORDER 42", "find my order 42", "weather in Paris", ""]

    def expected(text: str) -> str:
        return hmac.new(log._key, normalise_query(text).encode(), hashlib.sha256).hexdigest()[:32]

    assert [log.query_hash(t) for t in texts] == [expected(t) for t in texts]
    assert log.query_hash(texts[0]) == log.query_hash(texts[0])  # the keyed state unchanged
    assert len({log.query_hash(t) for t in texts}) == 3  # the first two normalise alike
    got: list[str] = []
    threads = [
        threading.Thread(target=lambda: got.extend(log.query_hash(t) for t in texts * 50))
        for _ in range(4)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(got) == sorted([expected(t) for t in texts * 50] * 4)
    log.close()
