"""The wire-level ONNX reader and writer (embed/onnxwire.py) and the file the rewrite
writes with them: read back by the ``onnx`` package's own parser and checker."""

from __future__ import annotations

import numpy as np
import pytest

from toolscout.embed import onnxwire as wire
from toolscout.errors import ModelError


def test_a_node_and_a_tensor_read_back_what_was_written() -> None:
    node = wire.Node(
        "Attention", ["x", "w", "", "mask"], ["y"], "att", "com.microsoft",
        [wire.int_attribute("num_heads", 12)],
    )  # fmt: skip
    again = wire.Node.read(node.write())
    assert again == node
    values = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    tensor = wire.Tensor("q", wire.INT8, [3, 4], values.tobytes())
    assert wire.Tensor.read(tensor.write()) == tensor


def test_packed_dims_negative_ints_and_unknown_fields() -> None:
    packed = wire.encode([(wire.TENSOR_DIMS, wire.LEN, bytes([3, 0x80, 0x03]))])
    raw = wire.encode([(wire.TENSOR_RAW, wire.LEN, b"\x00" * 4)])
    assert wire.Tensor.read(packed + raw).dims == [3, 384]
    fields = [(1, wire.VARINT, -1), (2, wire.I32, 7), (3, wire.I64, 2**40), (9, wire.LEN, b"ab")]
    back = wire.parse(wire.encode(fields))
    assert back[0] == (1, wire.VARINT, 2**64 - 1)  # int64 -1 as protobuf writes it
    assert back[1:] == fields[1:]
    with pytest.raises(ModelError, match="not stored as raw bytes"):
        wire.Tensor.read(packed)
    with pytest.raises(ModelError, match="wire type"):
        wire.parse(bytes([(1 << 3) | 3]))


def test_the_made_file_is_a_valid_onnx_model() -> None:
    onnx = pytest.importorskip("onnx")
    from toolscout.embed.fused import make_fused
    from toolscout.embed.minilm import default_model_path

    made = onnx.load_from_string(make_fused(default_model_path().read_bytes()))
    onnx.checker.check_model(made)
    kinds = [n.op_type for n in made.graph.node]
    assert kinds.count("Attention") == 6 and "IsNaN" not in kinds
    assert {o.domain for o in made.opset_import} >= {"", "com.microsoft"}
    (attention,) = [n for n in made.graph.node if n.name == "toolscout_attention_0"]
    assert [(a.name, a.i) for a in attention.attribute] == [("num_heads", 12)]
