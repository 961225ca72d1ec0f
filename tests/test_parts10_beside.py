"""A request read in parts searches its parts' BM25 beside the query encoder
(discovery/beside.py), with the same hits and the same ranking as searched after it."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from support import CountingEmbedder, embedder, spec
from toolscout.discovery.beside import searched_beside
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.parts import request_parts
from toolscout.discovery.search import clear_query_cache, parse_query
from toolscout.policy import Principal
from toolscout.settings import SearchSettings
from toolscout.stores.base import Hits

TEXT = (
    "We are travelling to Oslo with the whole team for the conference next week. "
    "Search flights from Rome to Oslo on Monday morning, "
    "and convert 300 euros into Norwegian currency. "
    "Then show the weather forecast for Oslo that week."
)
SPECS = [
    spec("weather.forecast", summary="Weather forecast for a city: temperature and rain"),
    spec("fx.convert", summary="Convert an amount of money between currencies"),
    spec("flights.search", summary="Search flights between two airports on a date"),
    spec("hotels.book", summary="Book a hotel room in a city for the team"),
    *[spec(f"misc.tool{i}", summary=f"Unrelated file utility number {i}") for i in range(9)],
]
#: how long the encoder waits for the searches it expects beside it (they take
#: milliseconds; without the change they only start after it returns, and it gives up)
WAIT = 5.0


class _WaitsForSearches(CountingEmbedder):
    """The real model, which before encoding waits (up to :data:`WAIT`) until ``expected``
    BM25 searches were made, and records whether they were (``saw``)."""

    def __init__(self) -> None:
        super().__init__(embedder())
        self.searched = threading.Condition()
        self.searches = 0
        self.expected = 0
        self.saw: list[bool] = []

    def embed(self, texts: Any) -> Any:
        if self.expected:
            with self.searched:
                ok = self.searched.wait_for(lambda: self.searches >= self.expected, WAIT)
            self.saw.append(ok)
        return super().embed(texts)


def _counted(cat: Catalog, emb: _WaitsForSearches) -> list[tuple[str, tuple[str, ...]]]:
    """Each BM25 search of the store (its thread and terms); the real search still runs."""
    calls: list[tuple[str, tuple[str, ...]]] = []
    real = cat.store.lexical

    def lexical(terms: Sequence[str], allowed: Any, limit: int, **kw: Any) -> Hits:
        got = real(terms, allowed, limit, **kw)
        with emb.searched:
            calls.append((threading.current_thread().name, tuple(terms)))
            emb.searches += 1
            emb.searched.notify_all()
        return got

    cat.store.lexical = lexical  # type: ignore[method-assign]
    return calls


def test_the_parts_bm25_runs_beside_the_encoder_with_the_same_ranking(tmp_path: Path) -> None:
    settings = SearchSettings()
    parts = request_parts(TEXT)
    assert len(parts) >= 3
    emb = _WaitsForSearches()
    with Catalog.open(tmp_path / "c.db", embedder=emb, log=False) as cat:
        cat.add(SPECS)
        ent = cat.entitle(Principal.of("u", scopes=["*"]))
        df, n = cat.store.document_frequency()
        query = parse_query(TEXT, df, n, settings)
        calls = _counted(cat, emb)
        clear_query_cache()
        emb.expected = 1 + len(parts)  # the whole request's search and one a part
        beside = cat.retriever(settings).run(query, ent.ids)
        # every search was made while the encoder waited: on the pool, none after it
        assert emb.saw == [True]
        assert len(calls) == 1 + len(parts)
        assert all(name.startswith("toolscout-bm25") for name, _ in calls)
        assert beside.parts == parts
        # the same request again: its vectors cached, no encoder, each part searched on
        # this thread when it is ranked (the per-part path): the same ranking, bit for bit
        emb.expected = 0
        calls.clear()
        after = cat.retriever(settings).run(query, ent.ids)
        assert [name for name, _ in calls] == [threading.current_thread().name] * len(calls)
        assert len(calls) == 1 + len(parts)
        assert [(c.id, c.fused, c.lexical, c.dense) for c in beside.candidates] == [
            (c.id, c.fused, c.lexical, c.dense) for c in after.candidates
        ]
        assert beside.confidence == after.confidence
        assert {c.id for c in beside.candidates[:3]} == {
            "weather.forecast",
            "fx.convert",
            "flights.search",
        }


def test_a_short_request_searches_only_its_own_terms_beside_the_encoder(tmp_path: Path) -> None:
    settings = SearchSettings()
    emb = _WaitsForSearches()
    with Catalog.open(tmp_path / "c.db", embedder=emb, log=False) as cat:
        cat.add(SPECS)
        ent = cat.entitle(Principal.of("u", scopes=["*"]))
        df, n = cat.store.document_frequency()
        query = parse_query("convert euros to dollars", df, n, settings)
        calls = _counted(cat, emb)
        clear_query_cache()
        emb.expected = 1
        got = cat.retriever(settings).run(query, ent.ids)
        assert emb.saw == [True] and len(calls) == 1
        assert calls[0][1] == tuple(query.terms)
        assert got.parts == [] and got.candidates[0].id == "fx.convert"


def test_searched_beside_returns_both_sides_and_raises_after_both_ended() -> None:
    seen: list[tuple[str, ...]] = []

    def lexical(terms: Sequence[str]) -> Hits:
        seen.append(tuple(terms))
        return Hits([f"t:{t}" for t in terms], [1.0] * len(terms))

    got, whole, parts = searched_beside(lambda: "vectors", lexical, ["a", "b"], [["a"], ["b"]])
    assert got == "vectors"
    assert whole is not None and whole.ids == ["t:a", "t:b"]
    assert [p.ids for p in parts] == [["t:a"], ["t:b"]]
    assert seen == [("a", "b"), ("a",), ("b",)]  # the whole request first, parts in order
    # the caller has the whole request's hits and there is no part: no search at all
    assert searched_beside(lambda: 1, lexical, None, []) == (1, None, [])
    assert len(seen) == 3

    def fails() -> str:
        raise RuntimeError("encoder failed")

    with pytest.raises(RuntimeError, match="encoder failed"):
        searched_beside(fails, lexical, ["c"], [])
    assert seen[-1] == ("c",)  # the search ran to its end before the error was raised
