"""The int8 query encoder (embed/quantise.py), requests' own graph (embed/queries.py) and
the server's embedder (embed.server_embedder)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from support import CountingEmbedder as Counting
from support import embedder, spec
from toolscout.discovery.catalog import Catalog
from toolscout.embed import QUERY_ENCODER_ENV, server_embedder
from toolscout.embed.coalesce import CoalescingEmbedder
from toolscout.embed.minilm import MODEL_SHA256, MiniLMEmbedder, default_model_path
from toolscout.embed.quantise import CACHE_ENV, model_cache_dir, quantised_model
from toolscout.embed.queries import QuerySide, query_embedder
from toolscout.errors import ConfigError, MissingExtraError
from toolscout.modelcache import sidecar, sidecar_holds
from toolscout.policy import Principal

REQUESTS = [
    "where is order 94218",
    "refund the customer's last invoice",
    "restart the payments pod in staging",
    "who is on call for the database tonight",
    "translate this paragraph into German and keep the formatting",
]


@pytest.fixture(scope="module")
def int8_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def int8(int8_cache: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder(spin_wait=False, quantised=True, model_cache=int8_cache)


def test_the_int8_graph_is_made_once_from_the_shipped_file(
    int8: MiniLMEmbedder, int8_cache: Path
) -> None:
    int8.load()
    made = list(int8_cache.glob("*.onnx"))
    assert len(made) == 1 and MODEL_SHA256[:16] in made[0].name
    assert not list(int8_cache.glob(".making-*"))  # written atomically, nothing left over
    stamp = made[0].stat().st_mtime_ns
    again = quantised_model(default_model_path(), MODEL_SHA256, int8_cache)
    assert again == made[0] and again.stat().st_mtime_ns == stamp


def test_a_damaged_int8_graph_in_the_cache_is_made_again(
    int8: MiniLMEmbedder, int8_cache: Path
) -> None:
    int8.load()
    (made,) = int8_cache.glob("*.onnx")
    whole = made.read_bytes()
    assert sidecar(made).is_file() and sidecar_holds(made)
    made.write_bytes(whole[: len(whole) // 2])  # cut short, as a full disk leaves it
    assert not sidecar_holds(made)
    again = quantised_model(default_model_path(), MODEL_SHA256, int8_cache)
    assert again == made and again.read_bytes() == whole and sidecar_holds(again)
    sidecar(made).unlink()  # a file without its check is not trusted either
    stamp = made.stat().st_mtime_ns
    quantised_model(default_model_path(), MODEL_SHA256, int8_cache)
    assert made.stat().st_mtime_ns != stamp and sidecar_holds(made)


def test_int8_vectors_are_close_to_the_float_graphs_but_not_equal(int8: MiniLMEmbedder) -> None:
    f = embedder().embed(REQUESTS)
    q = int8.embed(REQUESTS)
    assert q.shape == f.shape and q.dtype == np.float32
    assert np.allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-5)
    cosines = (f * q).sum(axis=1)
    assert cosines.min() > 0.97, cosines
    assert not np.array_equal(f, q)  # a different graph: it must be measured (benchmarks)
    # each request's nearest float neighbour among the requests is itself
    assert list(np.argmax(q @ f.T, axis=1)) == list(range(len(REQUESTS)))


def test_the_model_cache_is_chosen_by_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert model_cache_dir() == tmp_path
    monkeypatch.delenv(CACHE_ENV)
    assert model_cache_dir().name == "models"


def test_making_it_without_onnx_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(MissingExtraError, match=r"toolscout\[int8\]"):
        quantised_model(default_model_path(), MODEL_SHA256, tmp_path)
    assert not list(tmp_path.iterdir())  # no half-made file left


def test_a_query_side_must_share_the_cards_model(int8: MiniLMEmbedder) -> None:
    class Other(Counting):
        @property
        def model_id(self) -> str:
            return "another-model"

    with pytest.raises(ConfigError, match="another-model"):
        QuerySide(embedder(), Other(int8))
    split = QuerySide(embedder(), int8)
    assert split.model_id == embedder().model_id and split.dim == 384
    assert query_embedder(split) is int8
    assert query_embedder(embedder()) is embedder()


def test_a_catalog_indexes_with_the_cards_side_and_discovers_with_the_query_side(
    int8: MiniLMEmbedder, tmp_path: Path
) -> None:
    cards, queries = Counting(embedder()), Counting(int8)
    with Catalog.open(tmp_path / "c.db", embedder=QuerySide(cards, queries), log=False) as cat:
        cat.add([
            spec("orders.find", "Find an order by its number and show where it is."),
            spec("billing.refund", "Refund an invoice to the customer."),
            spec("k8s.restart", "Restart a pod in a cluster namespace."),
        ])  # fmt: skip
        indexed = len(cards.texts)
        assert indexed > 0
        queries.texts.clear()
        anyone = Principal.of("u", scopes=["*"])
        got = cat.discover("where is my order 94218", anyone, k=1, tier="progressive")
        assert got.ids == ["orders.find"]
        assert "where is my order 94218" in queries.texts
        assert len(cards.texts) == indexed  # the cards' graph never saw the request


def test_the_server_embedder_follows_the_choice(
    monkeypatch: pytest.MonkeyPatch, int8_cache: Path
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(int8_cache))
    cards = MiniLMEmbedder(spin_wait=False)
    monkeypatch.setenv(QUERY_ENCODER_ENV, "float")
    plain = server_embedder(cards)
    assert isinstance(plain, CoalescingEmbedder) and plain.inner is cards
    monkeypatch.setenv(QUERY_ENCODER_ENV, "int8")
    split = server_embedder(cards)
    assert isinstance(split, QuerySide) and split.cards is cards
    side = query_embedder(split)
    assert isinstance(side, CoalescingEmbedder)
    assert isinstance(side.inner, MiniLMEmbedder) and side.inner.quantised
    assert side.inner.spin_wait is False
    # any other model keeps its one graph
    assert isinstance(server_embedder(Counting(cards)), CoalescingEmbedder)  # type: ignore[arg-type]
    monkeypatch.setenv(QUERY_ENCODER_ENV, "int4")
    with pytest.raises(ConfigError, match=QUERY_ENCODER_ENV):
        server_embedder(cards)
