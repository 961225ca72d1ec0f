"""The shared vector cache (``toolscout.embed.vectorcache``): the model's own vectors, once
per (model id, text), shared by processes, and never a failed embedding."""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from support import embedder, spec
from toolscout.discovery.catalog import Catalog
from toolscout.embed import make_embedder
from toolscout.embed.base import Vectors, normalise
from toolscout.embed.vectorcache import (
    FILE_NAME,
    VECTOR_CACHE_ENV,
    CachedEmbedder,
    VectorCache,
    with_vector_cache,
)
from toolscout.policy import Principal

TEXTS = ["Send an email to a recipient.", "Weather forecast for a city.", "Book a taxi."]


class HashEmbedder:
    """A small deterministic embedder (a vector from the text's SHA-256) that counts the
    texts it embeds; ``salt`` makes another process's vectors differ from this one's."""

    def __init__(self, model_id: str = "hash-8", salt: str = "", dim: int = 8) -> None:
        self.model_id = model_id
        self.dim = dim
        self.salt = salt
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.embedded.extend(texts)
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = hashlib.sha256(f"{self.salt}{text}".encode()).digest()
            rows[row] = np.random.default_rng(list(seed)).random(self.dim) + 0.1
        return normalise(rows)


def _rows(directory: Path) -> int:
    import sqlite3

    with sqlite3.connect(directory / FILE_NAME) as db:
        count: int = db.execute("SELECT count(*) FROM vectors").fetchone()[0]
    return count


def test_the_models_vectors_are_kept_as_it_returned_them(tmp_path: Path) -> None:
    model = embedder()
    first = CachedEmbedder(model, VectorCache(tmp_path))
    got = first.embed(TEXTS)
    assert np.array_equal(got, model.embed(TEXTS))
    assert (first.hits, first.misses) == (0, 3)
    # another embedder on the same directory (as another process would be) embeds nothing
    inner = HashEmbedder(model_id=model.model_id, dim=model.dim)
    again = CachedEmbedder(inner, VectorCache(tmp_path))
    mixed = again.embed([TEXTS[2], TEXTS[0], TEXTS[2]])
    assert inner.embedded == [] and (again.hits, again.misses) == (3, 0)
    assert mixed.dtype == np.float32 and mixed.tobytes() == got[[2, 0, 2]].tobytes()
    assert again.embed([]).shape == (0, 384)


def test_only_missing_texts_are_embedded_once_each(tmp_path: Path) -> None:
    inner = HashEmbedder()
    cached = CachedEmbedder(inner, VectorCache(tmp_path))
    cached.embed(TEXTS[:1])
    out = cached.embed([TEXTS[1], TEXTS[0], TEXTS[1], TEXTS[2]])
    assert inner.embedded == [TEXTS[0], TEXTS[1], TEXTS[2]]
    assert np.array_equal(out, HashEmbedder().embed([TEXTS[1], TEXTS[0], TEXTS[1], TEXTS[2]]))
    assert _rows(tmp_path) == 3


def test_another_model_id_never_reads_the_vectors(tmp_path: Path) -> None:
    CachedEmbedder(HashEmbedder("model-a"), VectorCache(tmp_path)).embed(TEXTS)
    other = HashEmbedder("model-b", salt="b")
    got = CachedEmbedder(other, VectorCache(tmp_path)).embed(TEXTS)
    assert other.embedded == TEXTS
    assert np.array_equal(got, HashEmbedder("model-b", salt="b").embed(TEXTS))
    assert _rows(tmp_path) == 6


def test_a_damaged_file_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    damaged = b"this is not a database\n" * 100
    (tmp_path / FILE_NAME).write_bytes(damaged)
    inner = HashEmbedder()
    cached = CachedEmbedder(inner, VectorCache(tmp_path))
    with caplog.at_level(logging.WARNING, logger="toolscout.embed.vectorcache"):
        assert np.array_equal(cached.embed(TEXTS), HashEmbedder().embed(TEXTS))
        assert np.array_equal(cached.embed(TEXTS), HashEmbedder().embed(TEXTS))
    assert inner.embedded == TEXTS + TEXTS  # nothing was served from it
    assert [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()] != []
    assert len(caplog.records) == 1  # said once
    assert (tmp_path / FILE_NAME).read_bytes() == damaged  # and left as it was


def test_a_cache_directory_that_cannot_be_made_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    inner = HashEmbedder()
    got = CachedEmbedder(inner, VectorCache(tmp_path / "file" / "cache")).embed(TEXTS)
    assert np.array_equal(got, HashEmbedder().embed(TEXTS)) and inner.embedded == TEXTS


def test_a_row_of_the_wrong_size_is_a_miss(tmp_path: Path) -> None:
    import sqlite3

    CachedEmbedder(HashEmbedder(), VectorCache(tmp_path)).embed(TEXTS)
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        db.execute("UPDATE vectors SET vector = x'00112233'")
    inner = HashEmbedder()
    got = CachedEmbedder(inner, VectorCache(tmp_path)).embed(TEXTS)
    assert inner.embedded == TEXTS and np.array_equal(got, HashEmbedder().embed(TEXTS))


_WORKER = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[3])
    from pathlib import Path
    from test_vectorcache import HashEmbedder, TEXTS
    from toolscout.embed.vectorcache import CachedEmbedder, VectorCache

    cached = CachedEmbedder(HashEmbedder(salt=sys.argv[2]), VectorCache(Path(sys.argv[1])))
    texts = [f"{t} #{i}" for i in range(200) for t in TEXTS]
    out = [cached.embed(texts[i : i + 7]).tolist() for i in range(0, len(texts), 7)]
    print(json.dumps([row for rows in out for row in rows]))
    """
)


def test_processes_and_threads_sharing_it_get_one_vector_per_text(tmp_path: Path) -> None:
    """Six processes (each with vectors of its own for the same texts) and four threads
    embed the same 600 texts at once: every one of them gets, for each text, the vector
    the cache kept (the first stored), and the file holds one row a text."""
    tests = str(Path(__file__).parent)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(tmp_path), f"p{n}", tests],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(6)
    ]
    texts = [f"{t} #{i}" for i in range(200) for t in TEXTS]
    results: list[Vectors] = []

    def run(salt: str) -> None:
        cached = CachedEmbedder(HashEmbedder(salt=salt), VectorCache(tmp_path))
        parts = [cached.embed(texts[i : i + 5]) for i in range(0, len(texts), 5)]
        results.append(np.concatenate(parts))

    threads = [threading.Thread(target=run, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        results.append(np.array(json.loads(out), dtype=np.float32))
    assert _rows(tmp_path) == len(texts)
    kept = CachedEmbedder(HashEmbedder(salt="late"), VectorCache(tmp_path))
    stored = kept.embed(texts)
    assert kept.misses == 0
    for got in results:
        assert np.array_equal(got, stored)


def test_the_environment_turns_it_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VECTOR_CACHE_ENV, raising=False)
    plain = HashEmbedder()
    assert with_vector_cache(plain) is plain
    monkeypatch.setenv(VECTOR_CACHE_ENV, str(tmp_path / "vectors"))
    wrapped = with_vector_cache(plain)
    assert isinstance(wrapped, CachedEmbedder) and wrapped.inner is plain
    made = make_embedder()
    assert isinstance(made, CachedEmbedder) and made.model_id == "all-MiniLM-L6-v2-int8"


def test_a_second_catalog_of_the_same_cards_embeds_nothing(tmp_path: Path) -> None:
    """Two catalogs of the same tools: the second one's index is answered by the cache and
    both find the same tool."""
    tools = [
        spec("weather.forecast", "Weather forecast for a city."),
        spec("cabs.book_taxi", "Book a taxi to an address."),
        spec("mail.send_email", "Send an email to a recipient."),
    ]
    found = []
    for name in ("a", "b"):
        cached = CachedEmbedder(embedder(), VectorCache(tmp_path / "cache"))
        with Catalog.open(tmp_path / f"{name}.db", embedder=cached, log=False) as cat:
            cat.add(tools)
            got = cat.discover("will it rain tomorrow", Principal.of("p"), k=1, tier="progressive")
            found.append(got.ids)
        assert (cached.misses == 0) == (name == "b"), (name, cached.hits, cached.misses)
    assert found[0] == found[1] == ["weather.forecast"]


def test_the_model_is_loaded_by_the_first_text_the_cache_lacks(tmp_path: Path) -> None:
    from toolscout.embed.minilm import MiniLMEmbedder

    CachedEmbedder(embedder(), VectorCache(tmp_path)).embed(TEXTS[:2])
    model = MiniLMEmbedder(spin_wait=False)
    cached = CachedEmbedder(model, VectorCache(tmp_path))
    cached.load()
    cached.embed(TEXTS[:2])
    assert model._session is None  # every text was cached: never loaded
    cached.embed(TEXTS)
    assert model._session is not None and (cached.hits, cached.misses) == (4, 1)
