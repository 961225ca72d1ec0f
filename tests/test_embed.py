from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support import embedder
from toolscout.embed.coalesce import CoalescingEmbedder
from toolscout.embed.minilm import MiniLMEmbedder, runs, text_hash
from toolscout.errors import ConfigError, ModelError


def test_vectors_are_unit_length_and_semantic() -> None:
    v = embedder().embed(["kill the stuck job", "terminate a hung batch process", "bake a cake"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2


def test_batching_does_not_change_vectors() -> None:
    texts = [
        "short",
        "a much longer sentence about refunds and invoices and orders",
        "mid size text",
    ]
    together = embedder().embed(texts)
    alone = np.stack([embedder().embed([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-4)


def test_empty_input() -> None:
    assert embedder().embed([]).shape == (0, 384)


def test_corrupt_model_file_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="sha256"):
        MiniLMEmbedder(fake).embed(["x"])


def test_missing_model_file(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not found"):
        MiniLMEmbedder(tmp_path / "nope.onnx").embed(["x"])


def test_text_hash_depends_on_model_and_text() -> None:
    assert text_hash("m", "a") == text_hash("m", "a")
    assert text_hash("m", "a") != text_hash("n", "a") != text_hash("m", "b")


def _spinning(emb: MiniLMEmbedder) -> str:
    emb.embed(["load the session"])
    options = emb._session.get_session_options()
    return str(options.get_session_config_entry("session.intra_op.allow_spinning"))


def test_spin_wait_is_on_for_one_process_and_off_when_asked() -> None:
    # on: one request alone encodes faster; off: a server's concurrent requests share cores
    assert _spinning(MiniLMEmbedder()) == "1"
    off = MiniLMEmbedder(spin_wait=False)
    assert _spinning(off) == "0"
    same = embedder().embed(["terminate a hung batch process"])
    assert np.allclose(off.embed(["terminate a hung batch process"]), same, atol=1e-6)


def test_the_environment_turns_spin_wait_off_and_caps_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolscout.embed import SPIN_ENV, THREADS_ENV, default_embedder

    monkeypatch.delenv(SPIN_ENV, raising=False)  # the suite sets it (tests/conftest.py)
    monkeypatch.delenv(THREADS_ENV, raising=False)
    plain = default_embedder()
    assert isinstance(plain, MiniLMEmbedder) and _spinning(plain) == "1"
    assert _spinning(default_embedder(spin_wait=False)) == "0"
    monkeypatch.setenv(SPIN_ENV, "1")  # never turns it on against the caller
    assert _spinning(default_embedder(spin_wait=False)) == "0"
    monkeypatch.setenv(SPIN_ENV, "0")
    monkeypatch.setenv(THREADS_ENV, "1")
    capped = default_embedder()
    assert isinstance(capped, MiniLMEmbedder) and _spinning(capped) == "0"
    assert capped._session.get_session_options().intra_op_num_threads == 1
    same = embedder().embed(["terminate a hung batch process"])
    assert np.allclose(capped.embed(["terminate a hung batch process"]), same, atol=1e-6)
    for name, bad in ((SPIN_ENV, "no"), (THREADS_ENV, "0"), (THREADS_ENV, "two")):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ConfigError, match=rf"\${name} must be .*{bad!r}"):
            default_embedder()
        monkeypatch.setenv(name, "1")


def test_the_server_encodes_without_spin_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolscout.cli.serve import build_service
    from toolscout.embed.vectorcache import VECTOR_CACHE_ENV

    monkeypatch.delenv(VECTOR_CACHE_ENV, raising=False)  # the suite's cache would wrap it

    service = build_service(str(tmp_path / "c.db"), jwt_key="k" * 32)
    try:
        # concurrent requests' texts share encoder runs (embed/coalesce.py)
        emb = service.catalog.embedder
        assert isinstance(emb, CoalescingEmbedder) and emb.model_id == MiniLMEmbedder.model_id
        assert isinstance(emb.inner, MiniLMEmbedder) and _spinning(emb.inner) == "0"
    finally:
        service.close()


def test_runs_group_texts_of_similar_length_and_cover_each_text_once() -> None:
    lengths = [40, 5, 6, 120, 7, 41, 5, 118]
    got = runs(lengths, max_rows=32)
    assert sorted(i for run in got for i in run) == list(range(len(lengths)))
    widths = [sorted(lengths[i] for i in run) for run in got]
    # the short texts are not padded to a long one's width, and like lengths share a run
    assert widths == [[5, 5, 6, 7], [40, 41], [118, 120]]
    # one run when padding costs less than another run would
    assert runs([10, 12, 11], max_rows=32) == [[0, 2, 1]]
    # never more than max_rows rows to a run
    many = runs([8] * 70, max_rows=32)
    assert max(len(r) for r in many) <= 32 and sum(len(r) for r in many) == 70
    assert runs([], max_rows=32) == []


def test_vectors_do_not_depend_on_how_texts_are_grouped_into_runs() -> None:
    texts = ["refund", "kill the stuck job", "x " * 60 + "restart the payments pod", "page"]
    alone = np.stack([embedder().embed([t])[0] for t in texts])
    assert np.allclose(embedder().embed(texts), alone, atol=1e-5)
    assert np.allclose(embedder().embed(texts[::-1])[::-1], alone, atol=1e-5)
