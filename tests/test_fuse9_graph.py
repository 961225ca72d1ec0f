"""The fused-attention graph (embed/fused.py): made locally from the shipped file once,
checked when read and made again when damaged, its vectors within a tight tolerance of the
shipped graph's, and ``$TOOLSCOUT_FUSED_ATTENTION=0`` giving the shipped graph's bits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from toolscout.embed import fused as embed_fused
from toolscout.embed import onnxwire as wire
from toolscout.embed import session as embed_session
from toolscout.embed.minilm import MODEL_SHA256, MiniLMEmbedder, default_model_path
from toolscout.errors import ModelError

#: written for this test: short and long requests, a card-like text, punctuation, a
#: one-word text and one cut at the model's 128 word pieces, so a batch is padded
TEXTS = [
    "rename every photo in the holiday folder by the date it was taken",
    "convert 250 euros to japanese yen at today's rate",
    "weather?",
    "ticket_tracker.close_issue: Close an open issue in the team's tracker, with a reason.",
    "which of my calendar invitations for next week overlap with the dentist appointment",
    "summarise " + "the meeting notes and list each action item with its owner, " * 12,
]
#: how far a fused vector may be from the shipped graph's (float rounding of a different
#: summation order; measured ~1.5e-7 on these texts)
MAX_ABS = 1e-6


def _shipped_vectors(texts: list[str]) -> np.ndarray:
    """The shipped file run by a plain ONNX Runtime session (no code of this change)."""
    import onnxruntime as ort

    from toolscout.embed.minilm import _pooled, load_tokenizer

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    session = ort.InferenceSession(str(default_model_path()), sess_options=opts)
    tokenizer = load_tokenizer(128)
    out = []
    for text in texts:
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        feeds = {
            "input_ids": ids,
            "attention_mask": np.ones_like(ids),
            "token_type_ids": np.zeros_like(ids),
        }
        (hidden,) = session.run(["last_hidden_state"], feeds)
        out.append(_pooled(hidden, feeds["attention_mask"])[0])
    return np.array(out, dtype=np.float32)


@pytest.fixture(scope="module")
def shipped() -> np.ndarray:
    return _shipped_vectors(TEXTS)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fused-cache")


@pytest.fixture(scope="module")
def fused_vectors(cache: Path) -> np.ndarray:
    """One text a run through a session made from the shipped file (its fused graph and
    the optimised one kept in ``cache`` on the way)."""
    emb = MiniLMEmbedder(spin_wait=False, model_cache=cache, keep_session=True, fused=True)
    emb.load()
    assert emb.session_kind == "shipped, kept"
    return np.vstack([emb.embed([t]) for t in TEXTS])


def _made(cache: Path) -> Path:
    return cache / embed_fused.fused_name(MODEL_SHA256)


def test_fused_vectors_are_within_the_tolerance_of_the_shipped_graph(
    shipped: np.ndarray, fused_vectors: np.ndarray, cache: Path
) -> None:
    diff = np.abs(fused_vectors - shipped).max()
    assert diff <= MAX_ABS
    assert float((fused_vectors * shipped).sum(axis=1).min()) >= 1 - 1e-6
    # the fused graph ran (its vectors are not the shipped graph's bits)
    assert not embed_session.same_bits(fused_vectors, shipped)
    # a padded batch gives each text's own vector
    emb = MiniLMEmbedder(spin_wait=False, model_cache=cache, keep_session=True, fused=True)
    assert np.abs(emb.embed(TEXTS) - fused_vectors).max() <= MAX_ABS
    assert emb.session_kind == "kept"  # the kept optimised graph of the fused one
    # keeping off: made in memory, the same bits, nothing written
    off = MiniLMEmbedder(spin_wait=False, model_cache=cache / "off", keep_session=False, fused=True)
    assert embed_session.same_bits(np.vstack([off.embed([t]) for t in TEXTS]), fused_vectors)
    assert not (cache / "off").exists()


def test_the_made_graph_holds_one_attention_node_a_layer(
    fused_vectors: np.ndarray, cache: Path
) -> None:
    graph = [v for n, _, v in wire.parse(_made(cache).read_bytes()) if n == wire.MODEL_GRAPH]
    nodes = [wire.Node.read(bytes(v)) for n, _, v in wire.parse(bytes(graph[0])) if n == 1]
    kinds = [node.op_type for node in nodes]
    assert kinds.count("Attention") == 6
    assert "IsNaN" not in kinds and "Where" not in kinds and "Softmax" not in kinds
    assert kinds.count("MatMul") == 18  # three projections a layer became one


def test_made_once_then_read_from_the_cache(fused_vectors: np.ndarray, cache: Path) -> None:
    made = _made(cache)
    before = made.stat()
    again = embed_fused.fused_model(default_model_path(), MODEL_SHA256, cache)
    assert again == made
    after = made.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.parametrize("damage", ["flipped byte", "cut short", "sidecar gone"])
def test_a_damaged_made_graph_is_rejected_and_made_again(
    tmp_path: Path, fused_vectors: np.ndarray, cache: Path, damage: str
) -> None:
    good = _made(cache).read_bytes()
    target = _made(tmp_path)
    target.write_bytes(good)
    Path(f"{target}.json").write_bytes(Path(f"{_made(cache)}.json").read_bytes())
    if damage == "flipped byte":
        data = bytearray(good)
        data[len(data) // 2] ^= 0x01
        target.write_bytes(bytes(data))
    elif damage == "cut short":
        target.write_bytes(good[: len(good) - 1000])
    else:
        Path(f"{target}.json").unlink()
    assert embed_fused.fused_model(default_model_path(), MODEL_SHA256, tmp_path) == target
    assert target.read_bytes() == good
    emb = MiniLMEmbedder(spin_wait=False, model_cache=tmp_path, keep_session=True, fused=True)
    assert embed_session.same_bits(np.vstack([emb.embed([t]) for t in TEXTS]), fused_vectors)


def test_an_unwritable_cache_makes_the_graph_for_this_process_only(
    tmp_path: Path, fused_vectors: np.ndarray
) -> None:
    blocked = tmp_path / "a file, not a directory"
    blocked.write_text("")
    made = embed_fused.fused_model(default_model_path(), MODEL_SHA256, blocked)
    assert isinstance(made, bytes)
    emb = MiniLMEmbedder(spin_wait=False, model_cache=blocked, fused=True)
    assert embed_session.same_bits(np.vstack([emb.embed([t]) for t in TEXTS]), fused_vectors)


def test_the_off_switch_gives_the_shipped_graphs_bits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shipped: np.ndarray
) -> None:
    monkeypatch.setenv(embed_fused.FUSED_ENV, "0")
    off = MiniLMEmbedder(spin_wait=False, model_cache=tmp_path)
    assert not off.fused
    assert embed_session.same_bits(np.vstack([off.embed([t]) for t in TEXTS]), shipped)
    assert not _made(tmp_path).exists()
    monkeypatch.delenv(embed_fused.FUSED_ENV)
    assert MiniLMEmbedder(model_cache=tmp_path).fused  # on by default
    # a model given by path and the int8 query graph are never fused
    assert not MiniLMEmbedder(Path("x.onnx")).fused
    assert not MiniLMEmbedder(quantised=True).fused


def test_a_file_without_the_expected_layers_is_refused() -> None:
    node = wire.Node("Identity", ["x"], ["y"], "only")
    graph = wire.encode([(wire.GRAPH_NODE, wire.LEN, node.write())])
    model = wire.encode([(1, wire.VARINT, 10), (wire.MODEL_GRAPH, wire.LEN, graph)])
    with pytest.raises(ModelError, match="no attention layers"):
        embed_fused.make_fused(model)
    with pytest.raises(ModelError, match="runs past"):
        embed_fused.make_fused(model[:-3])
