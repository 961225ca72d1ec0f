"""The encoder's kept optimised graph (embed/session.py): the same vectors bit for bit as a
session over the shipped file, written once, checked, and never used when it is not what
was written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from support import BENCH
from toolscout.discovery.catalog import card_views
from toolscout.embed import session as embed_session
from toolscout.embed.minilm import MiniLMEmbedder
from toolscout.loader import demo_catalog_dir, read_catalog


def _texts() -> list[str]:
    """Card views of a third of the demo catalog's tools, a sample of bfcl's tools and
    requests (``benchmarks/encoder_session.py --check`` compares every one of them)."""
    demo = read_catalog([demo_catalog_dir()])[::3]
    texts = [view for spec in demo for view in card_views(spec)]
    tools = [json.loads(line) for line in (BENCH / "bfcl" / "tools.jsonl").read_text().splitlines()]
    texts += [f"{t['name']}: {t['description']}" for t in tools[::50]]
    lines = (BENCH / "bfcl" / "queries.jsonl").read_text().splitlines()
    queries = [json.loads(line) for line in lines]
    texts += [q["query"] for q in queries[::50]]
    return texts


def _kept_file(cache: Path) -> Path:
    (found,) = [p for p in cache.iterdir() if p.suffix == ".ort"]
    return found


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return _texts()


@pytest.fixture(scope="module")
def plain_vectors(texts: list[str]) -> np.ndarray:
    return MiniLMEmbedder(spin_wait=False, keep_session=False).embed(texts)


def _embedder(cache: Path) -> MiniLMEmbedder:
    return MiniLMEmbedder(spin_wait=False, model_cache=cache, keep_session=True)


def test_a_kept_graph_gives_the_same_vectors_bit_for_bit(
    tmp_path: Path, texts: list[str], plain_vectors: np.ndarray
) -> None:
    first = _embedder(tmp_path)
    first.load()
    assert first.session_kind == "shipped, kept"  # made from the shipped file, graph kept
    kept = _kept_file(tmp_path)
    assert kept.name == embed_session.kept_name(
        "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
        __import__("onnxruntime").__version__,
        __import__("toolscout.embed.fused").embed.fused.RECIPE,  # the default graph
    )
    assert json.loads(Path(f"{kept}.json").read_text())["check"] == embed_session.file_check(kept)
    second = _embedder(tmp_path)
    second.load()
    assert second.session_kind == "kept"
    assert len(texts) > 150
    assert embed_session.same_bits(second.embed(texts), plain_vectors)
    assert embed_session.same_bits(first.embed(texts[::4]), plain_vectors[::4])
    # one text at a time (other padding widths) as well
    for i in range(0, len(texts), 40):
        assert embed_session.same_bits(second.embed([texts[i]]), plain_vectors[i : i + 1])


def test_a_changed_kept_graph_is_never_used_and_is_made_again(
    tmp_path: Path, texts: list[str], plain_vectors: np.ndarray
) -> None:
    _embedder(tmp_path).load()
    kept = _kept_file(tmp_path)
    blob = bytearray(kept.read_bytes())
    blob[len(blob) // 2] ^= 0x01  # one bit of a weight, deep in the file
    kept.write_bytes(bytes(blob))
    again = _embedder(tmp_path)
    again.load()
    assert again.session_kind == "shipped, kept"  # the changed file removed, made again
    assert embed_session.same_bits(again.embed(texts[:20]), plain_vectors[:20])
    after = _embedder(tmp_path)
    after.load()
    assert after.session_kind == "kept"


@pytest.mark.parametrize("damage", ["sidecar missing", "sidecar garbled", "truncated"])
def test_a_kept_graph_without_its_digest_or_cut_short_is_made_again(
    tmp_path: Path, damage: str, texts: list[str], plain_vectors: np.ndarray
) -> None:
    _embedder(tmp_path).load()
    kept = _kept_file(tmp_path)
    sidecar = Path(f"{kept}.json")
    if damage == "sidecar missing":
        sidecar.unlink()
    elif damage == "sidecar garbled":
        sidecar.write_text("{not json")
    else:
        kept.write_bytes(kept.read_bytes()[: kept.stat().st_size // 3])
    again = _embedder(tmp_path)
    again.load()
    assert again.session_kind == "shipped, kept"
    assert embed_session.same_bits(again.embed(texts[:10]), plain_vectors[:10])
    assert json.loads(sidecar.read_text())["check"] == embed_session.file_check(kept)


def test_a_graph_whose_probe_differs_is_not_kept(tmp_path: Path) -> None:
    import onnxruntime as ort

    from toolscout.embed.minilm import default_model_path

    emb = MiniLMEmbedder(spin_wait=False, keep_session=False, fused=False)
    emb.load()
    expected = embed_session.probe_outputs(emb._session)
    tmp = tmp_path / ".making-x.ort"
    opts = emb._options(ort)()
    opts.optimized_model_filepath = str(tmp)
    opts.add_session_config_entry("session.save_model_format", "ORT")
    ort.InferenceSession(str(default_model_path()), sess_options=opts)
    target = tmp_path / "kept.ort"
    off_by_one_ulp = (expected.view(np.uint32) ^ np.uint32(1)).view(np.float32)
    embed_session._publish(ort, tmp, target, emb._options(ort), off_by_one_ulp)
    assert not target.exists() and not Path(f"{target}.json").exists()
    embed_session._publish(ort, tmp, target, emb._options(ort), expected)
    assert target.exists() and Path(f"{target}.json").exists()


def test_keeping_turned_off_or_impossible_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plain_vectors: np.ndarray, texts: list[str]
) -> None:
    monkeypatch.setenv(embed_session.KEPT_SESSION_ENV, "0")
    off = MiniLMEmbedder(spin_wait=False, model_cache=tmp_path)
    off.load()
    assert off.session_kind == "shipped" and list(tmp_path.iterdir()) == []
    monkeypatch.delenv(embed_session.KEPT_SESSION_ENV)
    blocked = tmp_path / "a file, not a directory"
    blocked.write_text("")
    emb = MiniLMEmbedder(spin_wait=False, model_cache=blocked)
    assert embed_session.same_bits(emb.embed(texts[:5]), plain_vectors[:5])
    assert emb.session_kind == "shipped"
    # a model given by path and the int8 query graph are never kept
    assert not MiniLMEmbedder(Path("x.onnx"), model_cache=tmp_path)._keep
    assert not MiniLMEmbedder(quantised=True, model_cache=tmp_path)._keep


def test_the_kept_name_holds_what_the_graph_depends_on() -> None:
    a = embed_session.kept_name("a" * 64, "1.32.0")
    assert a != embed_session.kept_name("b" * 64, "1.32.0")
    assert a != embed_session.kept_name("a" * 64, "1.33.0")
    assert f"opt{embed_session.KEPT_VERSION}" in a and a.endswith(".ort")
