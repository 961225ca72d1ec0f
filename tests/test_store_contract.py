"""The store contract: every backend behaves the same behind the protocols of stores.base.

Parametrised over implementations; a new backend adds one factory to ``FACTORIES``
and must pass this file unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pg_fixture import new_store
from support import spec
from toolscout.errors import StoreError
from toolscout.stores.base import KIND_ALIAS, KIND_CARD, KIND_LEARNED, IndexedTool, Store
from toolscout.stores.memory import MemoryStore
from toolscout.stores.sqlite import SQLiteStore

ALL_FIELDS = {
    "name": 4.0,
    "aliases": 2.5,
    "tags": 1.5,
    "summary": 1.0,
    "params": 0.6,
    "learned": 1.5,
}

Factory = Callable[[Path], Any]

FACTORIES: dict[str, Factory] = {
    "memory": lambda tmp: MemoryStore(),
    "sqlite": lambda tmp: SQLiteStore(tmp / "contract.db"),
    "postgres": new_store,
    "postgres-hnsw": lambda tmp: new_store(ann_threshold=0, exact_below=0),
}


def _vec(*xs: float) -> np.ndarray:
    v = np.zeros(384, dtype=np.float32)
    v[: len(xs)] = xs
    return (v / np.linalg.norm(v)).astype(np.float32)


def _tool(tool_id: str, text: str, *texts: tuple[str, str], **fields: str) -> IndexedTool:
    return IndexedTool(spec(tool_id), {"name": text, "summary": text, **fields}, list(texts))


SEED = [
    _tool("a.refund", "refund invoic", (KIND_CARD, "h1")),
    _tool("a.order", "find order", (KIND_CARD, "h2"), (KIND_ALIAS, "h4")),
    _tool("a.ship", "ship parcel order", (KIND_CARD, "h3")),
]
VECTORS = {"h1": _vec(1, 0), "h2": _vec(0, 1), "h3": _vec(0.2, 1), "h4": _vec(0, 0, 1)}
EVERYTHING = frozenset({"a.refund", "a.order", "a.ship"})


@pytest.fixture(params=sorted(FACTORIES))
def empty(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    store = FACTORIES[request.param](tmp_path)
    yield store
    store.close()


@pytest.fixture
def store(empty: Store) -> Store:
    empty.upsert(SEED, VECTORS, model_id="m")
    return empty


def test_implements_every_protocol(store: Store) -> None:
    assert isinstance(store, Store)


def test_cards_in_insertion_order_and_specs_lazily(store: Store) -> None:
    assert [c.id for c in store.cards()] == ["a.refund", "a.order", "a.ship"]
    specs = store.specs(["a.ship", "nope"])
    assert list(specs) == ["a.ship"]
    assert specs["a.ship"].parameters == spec("a.ship").parameters


def test_unchanged_tools_are_not_rewritten(store: Store) -> None:
    gen = store.generation()
    stats = store.upsert(SEED, {}, model_id="m")
    assert (stats.added, stats.updated, stats.unchanged) == (0, 0, 3)
    assert store.generation() == gen


def test_tools_the_indexer_found_unchanged_are_counted_and_kept(store: Store) -> None:
    """The indexer hands over only what changed (by the stored hash) and names the rest:
    ``replace_all`` keeps those, drops the others, and nothing unchanged is rewritten."""
    hashes = store.content_hashes(["a.refund", "a.order", "nope"])
    assert sorted(hashes) == ["a.order", "a.refund"] and all(hashes.values())
    fresh = IndexedTool(spec("a.ship"), {"name": "ship parcel"}, [(KIND_CARD, "h3")], "src-1")
    stats = store.upsert([fresh], {}, model_id="m", replace_all=True, unchanged=["a.order", "x"])
    assert (stats.updated, stats.unchanged, stats.removed) == (1, 1, 1)
    assert [c.id for c in store.cards()] == ["a.order", "a.ship"]
    # the given source digest is what is stored, and decides the next time
    assert store.content_hashes(["a.ship"]) == {"a.ship": "src-1"}
    gen = store.generation()
    again = store.upsert([fresh], {}, model_id="m", unchanged=["a.order"])
    assert (again.updated, again.unchanged) == (0, 2) and store.generation() == gen


def test_every_write_bumps_the_generation(store: Store) -> None:
    g0 = store.generation()
    store.upsert([_tool("a.new", "new tool", (KIND_CARD, "h1"))], {}, model_id="m")
    g1 = store.generation()
    store.delete(["a.new"])
    g2 = store.generation()
    store.set_meta("policy", "{}")
    g3 = store.generation()
    assert g0 < g1 < g2 < g3


def test_a_text_without_vector_refuses_the_whole_upsert(store: Store) -> None:
    gen = store.generation()
    bad = [_tool("a.new", "new", (KIND_CARD, "h1")), _tool("a.bad", "bad", (KIND_CARD, "zz"))]
    with pytest.raises(StoreError, match="no vector"):
        store.upsert(bad, {}, model_id="m")
    assert [c.id for c in store.cards()] == ["a.refund", "a.order", "a.ship"]
    assert store.generation() == gen


def test_replace_all_and_delete(store: Store) -> None:
    stats = store.upsert([SEED[0]], {}, model_id="m", replace_all=True)
    assert stats.removed == 2
    assert [c.id for c in store.cards()] == ["a.refund"]
    assert store.delete(["a.refund", "a.refund", "nope"]) == 1
    assert store.cards() == []
    assert store.lexical(["refund"], EVERYTHING, 10, weights=ALL_FIELDS).ids == []


def test_lexical_is_restricted_to_allowed(store: Store) -> None:
    assert set(store.lexical(["order"], EVERYTHING, 10, weights=ALL_FIELDS).ids) == {
        "a.order",
        "a.ship",
    }
    only = frozenset({"a.ship"})
    assert store.lexical(["order"], only, 10, weights=ALL_FIELDS).ids == ["a.ship"]
    assert store.lexical(["order"], frozenset(), 10, weights=ALL_FIELDS).ids == []


def test_lexical_ranks_by_bm25_with_field_weights(empty: Store) -> None:
    empty.upsert(
        [
            IndexedTool(spec("t.name"), {"name": "parcel", "summary": "other words"}, []),
            IndexedTool(spec("t.summary"), {"name": "other words", "summary": "parcel"}, []),
            IndexedTool(spec("t.none"), {"name": "unrelated", "summary": "unrelated"}, []),
        ],
        {},
        model_id="m",
    )
    allowed = frozenset({"t.name", "t.summary", "t.none"})
    name_heavy = {"name": 4.0, "summary": 1.0}
    hits = empty.lexical(["parcel"], allowed, 10, weights=name_heavy)
    assert hits.ids == ["t.name", "t.summary"]
    assert hits.scores[0] > hits.scores[1] > 0
    summary_heavy = {"name": 1.0, "summary": 4.0}
    assert empty.lexical(["parcel"], allowed, 10, weights=summary_heavy).ids[0] == "t.summary"
    # a field with no weight is not searched at all
    assert empty.lexical(["parcel"], allowed, 10, weights={"name": 1.0}).ids == ["t.name"]


def test_lexical_limit_holds_when_few_are_allowed(empty: Store) -> None:
    tools = [IndexedTool(spec(f"t.{i:03d}"), {"name": "common word"}, []) for i in range(300)]
    empty.upsert(tools, {}, model_id="m")
    allowed = frozenset({"t.007", "t.250", "t.299"})
    hits = empty.lexical(["common"], allowed, 5, weights={"name": 1.0})
    assert sorted(hits.ids) == ["t.007", "t.250", "t.299"]


def test_a_tenants_lexical_search_equals_the_whole_catalogs_narrowed(empty: Store) -> None:
    """Narrowing the match to the caller's tenants (a speed-up) changes no hit and no score:
    many tenants' copies, shared tools, a tool offered to two tenants, odd tenant names."""
    tenants = ["acme", "Bé Corp", "x-1", "zzscopeall", "acme corp"]
    tools = [
        IndexedTool(spec(f"{t}.{n}", tenants=[t]), {"name": f"{word} order", "summary": word}, [])
        for t in tenants
        for n, word in enumerate(["refund", "ship", "track", "cancel", "refund refund"])
    ]
    tools += [
        IndexedTool(spec(f"shared.{w}"), {"name": f"{w} order"}, []) for w in ["refund", "audit"]
    ]
    tools.append(IndexedTool(spec("pair.refund", tenants=["acme", "x-1"]), {"name": "refund"}, []))
    empty.upsert(tools, {}, model_id="m")
    everyone = frozenset(t.spec.id for t in tools)
    query = ["refund", "order"]
    whole = empty.lexical(query, everyone, 100, weights=ALL_FIELDS)
    for tenant in tenants:
        mine = frozenset(
            t.spec.id for t in tools if not t.spec.card.tenants or tenant in t.spec.card.tenants
        )
        hits = empty.lexical(query, mine, 100, weights=ALL_FIELDS)
        expected = [(t, s) for t, s in zip(whole.ids, whole.scores, strict=True) if t in mine]
        assert hits.ids == [t for t, _ in expected], tenant
        assert hits.scores == pytest.approx([s for _, s in expected]), tenant
        assert "shared.refund" in hits.ids and (tenant + ".0") in hits.ids
        assert ("pair.refund" in hits.ids) == (tenant in {"acme", "x-1"})
        # a few of them, then one tool alone
        assert empty.lexical(query, frozenset([f"{tenant}.1"]), 5, weights=ALL_FIELDS).ids == [
            f"{tenant}.1"
        ]


def test_dense_is_restricted_and_takes_the_best_view(store: Store) -> None:
    q = _vec(0, 0, 1)  # matches only a.order's alias
    hits = store.dense(q, EVERYTHING, 2, kinds={KIND_CARD, KIND_ALIAS}, model_id="m")
    assert hits.ids[0] == "a.order"
    assert hits.scores[0] == pytest.approx(1.0, abs=1e-5)
    cards_only = store.dense(q, EVERYTHING, 3, kinds={KIND_CARD}, model_id="m")
    assert cards_only.scores[0] < 0.5
    restricted = store.dense(_vec(1, 0), frozenset({"a.ship"}), 3, kinds={KIND_CARD}, model_id="m")
    assert restricted.ids == ["a.ship"]


def test_dense_scores_also_ids_beyond_the_limit(store: Store) -> None:
    hits = store.dense(_vec(1, 0), EVERYTHING, 1, kinds={KIND_CARD}, also=["a.order"], model_id="m")
    assert hits.ids == ["a.refund", "a.order"]


def test_neighbours_and_card_vectors(store: Store) -> None:
    store.upsert(
        [_tool("a.order", "find order", (KIND_CARD, "h2"), (KIND_LEARNED, "q1"))],
        {"q1": _vec(0, 0, 0, 1)},
        model_id="m",
    )
    near = store.neighbours(_vec(0, 0, 0, 1), EVERYTHING, kind=KIND_LEARNED, k=5, model_id="m")
    assert near[0][0] == "a.order" and near[0][1] == pytest.approx(1.0, abs=1e-5)
    assert store.neighbours(_vec(0, 0, 0, 1), frozenset({"a.ship"}), kind=KIND_LEARNED, k=5,
                            model_id="m") == []  # fmt: skip
    vecs = store.card_vectors(["a.refund", "nope"], "m")
    assert list(vecs) == ["a.refund"]
    assert float(vecs["a.refund"] @ VECTORS["h1"]) == pytest.approx(1.0, abs=1e-5)


def test_vector_cache_by_content_hash(store: Store) -> None:
    assert store.cached(["h1", "h2", "zz"], "m") == {"h1", "h2"}
    assert store.cached(["h1"], "other-model") == set()
    got = store.vectors_of(["h3", "zz"], "m")
    assert list(got) == ["h3"]
    assert np.allclose(got["h3"], VECTORS["h3"])


def test_document_frequency(store: Store) -> None:
    df, n = store.document_frequency()
    assert n == 3
    assert df["order"] == 2
    assert df["refund"] == 1


def test_meta_and_learned_phrases(store: Store) -> None:
    assert store.meta("policy") is None
    store.set_meta("policy", '{"roles": {}}')
    assert store.meta("policy") == '{"roles": {}}'
    store.learned_add([("a.order", "where is it", 2), ("a.order", "track it", 1)])
    store.learned_add([("a.order", "track it", 5)])
    assert store.learned(10) == {"a.order": ["track it", "where is it"]}
    assert store.learned(1) == {"a.order": ["track it"]}
    store.learned_clear()
    assert store.learned(10) == {}


def test_dense_finds_a_small_allowed_share_of_a_large_catalog(empty: Store) -> None:
    """A caller allowed 15 tools of 4,000 gets their nearest, even when every tool it may
    not use is nearer to the query (another tenant's copies, say): not whatever of them
    an unfiltered nearest-neighbour search over the whole catalog happened to reach
    (PostgreSQL's HNSW path must search within the allowed ids)."""
    rng = np.random.default_rng(3)
    n = 4000
    query = rng.standard_normal(384).astype(np.float32)
    query /= np.linalg.norm(query)
    matrix = rng.standard_normal((n, 384)).astype(np.float32)
    picked = rng.choice(n, 15, replace=False)
    matrix[picked] -= 6 * query  # the allowed tools lie on the far side of the query
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    tools = [_tool(f"big.{i:05d}", "word", (KIND_CARD, f"v{i}")) for i in range(n)]
    empty.upsert(tools, {f"v{i}": matrix[i] for i in range(n)}, model_id="m")
    allowed = frozenset(f"big.{i:05d}" for i in picked)
    exact = sorted(allowed, key=lambda t: -float(matrix[int(t[4:])] @ query))[:10]
    hits = empty.dense(query, allowed, 10, kinds={KIND_CARD}, model_id="m")
    assert set(hits.ids) <= allowed
    assert len(set(hits.ids) & set(exact)) >= 9, (hits.ids, exact)


def test_lexical_finds_other_languages_as_the_query_is_tokenised(empty: Store) -> None:
    """Cards and queries share toolscout.discovery.lexical: accents folded, CJK as
    bigrams; every backend must match the terms and count them the same way."""
    from toolscout.discovery.lexical import terms

    texts = {
        "t.ja": "東京の天気予報を取得する",
        "t.zh": "查询北京的航班信息",
        "t.fr": "Réserver une crêpe à la crêperie",
        "t.ru": "Отправить счёт клиенту",
    }
    empty.upsert(
        [IndexedTool(spec(t), {"summary": " ".join(terms(x))}, []) for t, x in texts.items()],
        {},
        model_id="m",
    )
    allowed = frozenset(texts)

    def top(query: str) -> str:
        return empty.lexical(terms(query), allowed, 5, weights={"summary": 1.0}).ids[0]

    assert top("明日の天気は？") == "t.ja"
    assert top("北京航班") == "t.zh"
    assert top("crepe creperie reserver") == "t.fr"
    assert top("счет") == "t.ru"  # ё folded to е on both sides
    df, _ = empty.document_frequency()
    assert df["天気"] == 1 and df["北京"] == 1 and df["crepe"] == 1
