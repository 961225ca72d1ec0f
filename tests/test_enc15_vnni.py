"""The VNNI query graph (embed/vnni.py): chosen by the CPU's flags and the env switch, made
once into the model cache, its weights the shipped int8 ones exactly, its vectors near the
cards' graph's, and what a server encodes requests with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from toolscout.embed import onnxwire as wire
from toolscout.embed import server_embedder, vnni
from toolscout.embed.coalesce import CoalescingEmbedder
from toolscout.embed.minilm import MODEL_SHA256, MiniLMEmbedder, default_model_path
from toolscout.embed.queries import query_embedder
from toolscout.errors import ConfigError, ModelError
from toolscout.modelcache import sidecar

WITH_VNNI = frozenset({"fpu", "avx2", "avx512f", "avx512_vnni"})
WITH_AVX_VNNI = frozenset({"fpu", "avx2", "avx_vnni"})
WITHOUT = frozenset({"fpu", "sse4_2", "avx2", "fma", "avx512f"})
TEXTS = [
    "find my order",
    "send an email to the team about the quarterly report",
    "what will the weather be in Paris tomorrow",
    "convert 250 US dollars to euros and then book a flight to Lisbon next Friday",
]


def _reader(flags: frozenset[str]) -> vnni.FlagsReader:
    return lambda: flags


def test_the_cpu_flags_choose_the_query_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(vnni.VNNI_ENV, "1")
    assert vnni.has_vnni(WITH_VNNI) and vnni.has_vnni(WITH_AVX_VNNI)
    assert not vnni.has_vnni(WITHOUT) and not vnni.has_vnni(frozenset())
    for flags in (WITH_VNNI, WITH_AVX_VNNI):
        emb = MiniLMEmbedder(model_cache=tmp_path, cpu_flags=_reader(flags))
        assert emb.query_side is not None and emb.query_side.vnni
        assert query_embedder(emb) is emb.query_side
        assert not emb.vnni and emb.query_side.query_side is None  # no side of a side
    plain = MiniLMEmbedder(model_cache=tmp_path, cpu_flags=_reader(WITHOUT))
    assert plain.query_side is None and query_embedder(plain) is plain
    # never for a model given by path or the int8 graph, whatever the CPU
    assert MiniLMEmbedder(Path("x.onnx"), cpu_flags=_reader(WITH_VNNI)).query_side is None
    assert MiniLMEmbedder(quantised=True, cpu_flags=_reader(WITH_VNNI)).query_side is None
    with pytest.raises(ModelError, match="shipped model only"):
        MiniLMEmbedder(Path("x.onnx"), vnni=True)


def test_the_env_switch_turns_it_on_and_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(vnni.VNNI_ENV, raising=False)
    assert vnni.vnni_enabled(_reader(WITH_VNNI)) is vnni.DEFAULT_ON is False  # off unset
    assert MiniLMEmbedder(cpu_flags=_reader(WITH_VNNI)).query_side is None
    monkeypatch.setenv(vnni.VNNI_ENV, "0")
    assert not vnni.vnni_enabled(_reader(WITH_VNNI))
    assert MiniLMEmbedder(cpu_flags=_reader(WITH_VNNI)).query_side is None
    monkeypatch.setenv(vnni.VNNI_ENV, "1")
    assert vnni.vnni_enabled(_reader(WITH_VNNI))
    assert MiniLMEmbedder(cpu_flags=_reader(WITH_VNNI)).query_side is not None
    assert not vnni.vnni_enabled(_reader(WITHOUT))  # on, but no VNNI: the fused graph
    monkeypatch.setenv(vnni.VNNI_ENV, "yes")
    with pytest.raises(ConfigError, match="TOOLSCOUT_VNNI_QUERIES must be 0 or 1, not 'yes'"):
        MiniLMEmbedder(cpu_flags=_reader(WITH_VNNI))
    # asked for explicitly: the caller's word over the CPU's flags
    assert MiniLMEmbedder(vnni_queries=True, cpu_flags=_reader(WITHOUT)).query_side is not None
    assert MiniLMEmbedder(vnni_queries=False, cpu_flags=_reader(WITH_VNNI)).query_side is None


def _graph(model: bytes) -> tuple[list[wire.Node], dict[str, wire.Tensor]]:
    (graph,) = [v for n, _, v in wire.parse(model) if n == wire.MODEL_GRAPH]
    fields = wire.parse(bytes(graph))
    nodes = [wire.Node.read(bytes(v)) for n, _, v in fields if n == wire.GRAPH_NODE]
    inits = [wire.Tensor.read(bytes(v)) for n, _, v in fields if n == wire.GRAPH_INITIALIZER]
    return nodes, {t.name: t for t in inits}


def test_the_block_wise_weights_are_the_shipped_int8_weights_exactly() -> None:
    shipped = default_model_path().read_bytes()
    made = vnni.make_vnni(shipped)
    nodes, inits = _graph(made)
    blockwise = [n for n in nodes if n.op_type == "MatMulNBits"]
    assert len(blockwise) == 18  # six layers: attention output, feed-forward in and out
    assert not [n for n in nodes if n.op_type == "MatMul" and n.inputs[1] in inits]
    assert len([n for n in nodes if n.op_type == "Attention"]) == 6
    _, shipped_inits = _graph(shipped)
    int8 = {
        name: np.frombuffer(t.raw, np.int8).reshape(t.dims)
        for name, t in shipped_inits.items()
        if t.data_type == wire.INT8 and len(t.dims) == 2 and t.dims[1] in (384, 1536)
    }
    matched = 0
    for node in blockwise:
        packed = inits[node.inputs[1]]
        scales = np.frombuffer(inits[node.inputs[2]].raw, np.float32).reshape(packed.dims[:2])
        assert np.all(scales == scales[:, :1])  # one scale a column, in every block
        values = np.frombuffer(packed.raw, np.uint8).reshape(packed.dims[0], -1)
        q = (values.astype(np.int16) - 128).astype(np.int8).T
        same = [n for n, w in int8.items() if w.shape == q.shape and np.array_equal(w, q)]
        matched += len(same) == 1
    assert matched == len(blockwise)


def test_the_graph_is_made_once_and_made_again_when_damaged(tmp_path: Path) -> None:
    source = default_model_path()
    first = vnni.vnni_model(source, MODEL_SHA256, tmp_path)
    assert isinstance(first, Path) and first.name == vnni.vnni_name(MODEL_SHA256)
    assert sidecar(first).is_file()
    stamp = first.stat()
    again = vnni.vnni_model(source, MODEL_SHA256, tmp_path)
    assert again == first
    assert (first.stat().st_ino, first.stat().st_mtime_ns) == (stamp.st_ino, stamp.st_mtime_ns)
    with first.open("r+b") as f:  # cut short: its sidecar's check fails, so it is made again
        f.truncate(stamp.st_size // 2)
    remade = vnni.vnni_model(source, MODEL_SHA256, tmp_path)
    assert remade == first and first.stat().st_size == stamp.st_size
    assert first.read_bytes() == vnni.make_vnni(source.read_bytes())


def test_a_cache_that_cannot_be_written_gives_the_graph_for_this_process(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    made = vnni.vnni_model(default_model_path(), MODEL_SHA256, blocked)
    assert isinstance(made, bytes) and made == vnni.make_vnni(default_model_path().read_bytes())


def test_a_file_without_the_expected_graph_is_refused() -> None:
    with pytest.raises(ModelError, match="ONNX file"):
        vnni.make_vnni(wire.encode([(wire.MODEL_OPSET, wire.LEN, b"")]))


@pytest.fixture(scope="module")
def kept_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("vnni-cache")


def test_request_vectors_are_near_the_cards_graph_and_kept_sessions_agree(
    kept_cache: Path,
) -> None:
    emb = MiniLMEmbedder(
        spin_wait=False, threads=1, model_cache=kept_cache, keep_session=True, vnni_queries=True
    )
    emb.load()
    side = emb.query_side
    assert side is not None and side.session_kind == "shipped, kept"
    cards = np.vstack([emb.embed([t]) for t in TEXTS])
    requests = np.vstack([side.embed([t]) for t in TEXTS])
    cosine = (cards * requests).sum(axis=1)
    assert cosine.min() >= 0.999  # near-exact: only the activations are rounded
    assert not np.array_equal(cards, requests)  # a graph of its own, not the cards' one
    again = MiniLMEmbedder(
        spin_wait=False, threads=1, model_cache=kept_cache, keep_session=True, vnni_queries=True
    )
    assert again.query_side is not None
    again.query_side.load()
    assert again.query_side.session_kind == "kept" and again._session is None  # side only
    assert np.array_equal(np.vstack([again.query_side.embed([t]) for t in TEXTS]), requests)


def test_a_server_encodes_requests_with_the_vnni_graph(kept_cache: Path) -> None:
    cards = MiniLMEmbedder(spin_wait=False, threads=1, model_cache=kept_cache, vnni_queries=True)
    served = server_embedder(cards)
    queries = query_embedder(served)
    assert isinstance(queries, CoalescingEmbedder) and queries.inner is cards.query_side
    off = MiniLMEmbedder(spin_wait=False, threads=1, model_cache=kept_cache, vnni_queries=False)
    served_off = server_embedder(off)
    assert query_embedder(served_off) is served_off  # requests through the cards' graph
