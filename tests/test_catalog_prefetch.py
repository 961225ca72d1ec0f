"""Opening a stored catalog loads the query encoder and the token counter in the background."""

from __future__ import annotations

import time
from pathlib import Path

from support import embedder, spec
from toolscout.discovery import tokencount
from toolscout.discovery.catalog import Catalog, prefetch_models
from toolscout.embed.minilm import MiniLMEmbedder


def _wait_loaded(model: MiniLMEmbedder, seconds: float = 120.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if model._session is not None:
            return True
        time.sleep(0.05)
    return False


def test_prefetch_loads_the_model_and_the_token_counter() -> None:
    model = MiniLMEmbedder()
    for thread in prefetch_models(model):
        thread.join(timeout=120)
    assert model._session is not None and tokencount._encoding is not None


def test_opening_a_stored_catalog_prefetches_but_an_empty_one_does_not(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    empty = MiniLMEmbedder()
    with Catalog.open(path, embedder=empty, log=False):
        time.sleep(0.2)
        assert empty._session is None  # nothing stored yet: nothing to discover over
    with Catalog.open(path, embedder=embedder(), log=False) as cat:
        cat.add([spec("a.find_order", "Find an order by its number.")])
    stored = MiniLMEmbedder()
    with Catalog.open(path, embedder=stored, log=False):
        assert _wait_loaded(stored)  # no embed call made it load
    off = MiniLMEmbedder()
    with Catalog.open(path, embedder=off, log=False, prefetch=False):
        time.sleep(0.2)
        assert off._session is None
