"""The default encoder's graph with its attention fused, made locally from the shipped file.

The shipped all-MiniLM-L6-v2 export computes each layer's self-attention as ~35 small
nodes (three projections, reshapes and transposes, a ``Where``/``IsNaN`` masking chain
that ONNX Runtime's attention fusion does not match). :func:`fused_model` rewrites every
layer's chain as one contrib ``Attention`` node over the same weights: the query, key and
value projections' int8 weights and per-column scales side by side in one ``[384, 1152]``
weight (ONNX Runtime folds it to float at load as it folds the three), their biases in one,
the mask the request's ``attention_mask``. The session over it is made with ONNX Runtime's
``SkipLayerNormFusion`` off (:data:`SESSION_CONFIG`): its fused kernel cost more than the
``Add`` and ``LayerNormalization`` it replaces on this project's AVX2 machine. Together
about 0.91 of the shipped graph's CPU a request at one thread; the vectors differ from the
shipped graph's by at most ~3e-7 a component (docs/history/http-load.md, h/fuse9).

Nothing is downloaded: the graph is made from the file the PyPI package installed (whose
digest the caller checked) with this package's own protobuf reader (``embed/onnxwire.py``:
no ``onnx`` needed), once, and kept in the model cache under a name holding the source's
digest and :data:`RECIPE`, written atomically with a sidecar holding its size and CRC-32;
a reader checks them and makes the file again when they differ.
``$TOOLSCOUT_FUSED_ATTENTION=0`` turns it off (the shipped graph, bit for bit as before).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from toolscout.embed import onnxwire as wire
from toolscout.embed.onnxwire import Node, Tensor
from toolscout.errors import ModelError
from toolscout.modelcache import cached_or_made, model_cache_dir

#: ``0`` turns the fused graph off (the shipped graph encodes every text)
FUSED_ENV = "TOOLSCOUT_FUSED_ATTENTION"
#: bumped whenever the rewrite changes, so an older made file is never read
RECIPE = "attn-fused-1"
#: the model's attention heads (all-MiniLM-L6-v2: 12 heads of 32 over 384)
NUM_HEADS = 12
#: session config entries a session over the fused graph is made with
SESSION_CONFIG = {"optimization.disable_specified_optimizers": "SkipLayerNormFusion"}

_MASK = "toolscout_mask_int32"


def fused_enabled() -> bool:
    """Whether :data:`FUSED_ENV` leaves the fused graph on (the default)."""
    return os.environ.get(FUSED_ENV, "").strip() != "0"


def fused_name(source_sha256: str) -> str:
    return f"minilm-{source_sha256[:16]}-{RECIPE}.onnx"


def fused_model(source: Path, source_sha256: str, cache_dir: Path | None = None) -> Path | bytes:
    """The fused graph of ``source`` (whose digest the caller checked): the cached file
    when its check holds, else made and kept there; its bytes when the cache cannot be
    written (this process only)."""
    where = cache_dir if cache_dir is not None else model_cache_dir()
    return cached_or_made(
        where / fused_name(source_sha256), lambda: make_fused(source.read_bytes()), recipe=RECIPE
    )


def make_fused(shipped: bytes) -> bytes:
    """The rewrite: every layer's attention as one ``Attention`` node (see the module)."""
    model, graph, nodes, inits = wire.read_graph(shipped)
    nodes, added = _fuse_attention(nodes, inits)
    inits.update((t.name, t) for t in added)
    opset = wire.encode(
        [
            wire.string_field(wire.OPSET_DOMAIN, "com.microsoft"),
            (wire.OPSET_VERSION, wire.VARINT, 1),
        ]
    )
    out = wire.with_graph(model, graph, nodes, inits)
    return wire.encode([*out, (wire.MODEL_OPSET, wire.LEN, opset)])


def _fuse_attention(nodes: list[Node], inits: dict[str, Tensor]) -> tuple[list[Node], list[Tensor]]:
    """The nodes with each layer's attention output made by one ``Attention`` node (the
    old chain left for :func:`~toolscout.embed.onnxwire.live_nodes` to drop), and the new
    initializers."""
    producer = {o: node for node in nodes for o in node.outputs}
    consumers: dict[str, list[Node]] = {}
    for node in nodes:
        for name in node.inputs:
            consumers.setdefault(name, []).append(node)
    layers = sorted(
        int(name.split(".")[3])
        for name in inits
        if name.startswith("inner.encoder.layer.") and name.endswith(".attention.self.query.bias")
    )
    if not layers:
        raise ModelError("ONNX file: no attention layers found where the model has them")
    head = [Node("Cast", ["attention_mask"], [_MASK], "toolscout_mask_cast", "", [_to(wire.INT32)])]
    replaced: dict[str, Node] = {}
    added: list[Tensor] = []
    for layer in layers:
        prefix = f"inner.encoder.layer.{layer}.attention"
        x, weights, biases = _projections(prefix, producer, consumers, inits)
        name = f"toolscout_qkv_{layer}"
        q, scale = _side_by_side(weights, inits)
        bias = np.concatenate([_array(inits[b]) for b in biases]).astype(np.float32)
        added += [
            Tensor(f"{name}_q", wire.INT8, list(q.shape), q.tobytes()),
            Tensor(f"{name}_scale", wire.FLOAT, list(scale.shape), scale.tobytes()),
            Tensor(f"{name}_bias", wire.FLOAT, list(bias.shape), bias.tobytes()),
        ]
        head += [
            Node("Cast", [f"{name}_q"], [f"{name}_f"], f"{name}_cast", "", [_to(wire.FLOAT)]),
            Node("Mul", [f"{name}_f", f"{name}_scale"], [f"{name}_w"], f"{name}_mul"),
        ]
        context = _context(prefix, producer, consumers)
        attention = Node(
            "Attention",
            [x, f"{name}_w", f"{name}_bias", _MASK],
            [context],
            f"toolscout_attention_{layer}",
            "com.microsoft",
            [wire.int_attribute("num_heads", NUM_HEADS)],
        )
        replaced[producer[context].name] = attention
    body = [replaced.get(node.name, node) for node in nodes]
    return head + body, added


def _to(data_type: int) -> wire.Field:
    return wire.int_attribute("to", data_type)


def _projections(
    prefix: str,
    producer: dict[str, Node],
    consumers: dict[str, list[Node]],
    inits: dict[str, Tensor],
) -> tuple[str, list[str], list[str]]:
    """The input and the query, key and value projections' weight and bias names."""
    inputs: set[str] = set()
    weights: list[str] = []
    biases: list[str] = []
    for kind in ("query", "key", "value"):
        bias = f"{prefix}.self.{kind}.bias"
        matmul = _biased_matmul(bias, producer, consumers)
        if matmul is None or bias not in inits:
            raise ModelError(f"ONNX file: unexpected layout of {prefix}.self.{kind}")
        inputs.add(matmul.inputs[0])
        weights.append(matmul.inputs[1])
        biases.append(bias)
    if len(inputs) != 1:
        raise ModelError(f"ONNX file: {prefix}'s projections read different inputs")
    return inputs.pop(), weights, biases


def _side_by_side(weights: list[str], inits: dict[str, Tensor]) -> tuple[np.ndarray, np.ndarray]:
    """The three weights' int8 values and per-column scales, concatenated by column (each
    weight is ``Mul(Cast(int8), scale)`` in the shipped file, folded at load)."""
    qs, scales = [], []
    for name in weights:
        q, scale = inits.get(f"{name}_q"), inits.get(f"{name}_scale")
        if q is None or scale is None or q.data_type != wire.INT8 or scale.data_type != wire.FLOAT:
            raise ModelError(f"ONNX file: unexpected storage of weight {name}")
        qs.append(_array(q))
        scales.append(_array(scale).reshape(1, -1))
    return np.concatenate(qs, axis=1), np.concatenate(scales, axis=1).astype(np.float32)


def _array(tensor: Tensor) -> np.ndarray:
    dtype = {wire.FLOAT: np.float32, wire.INT8: np.int8}.get(tensor.data_type)
    if dtype is None:
        raise ModelError(f"ONNX file: unexpected type of {tensor.name}")
    return np.frombuffer(tensor.raw, dtype=dtype).reshape(tensor.dims)


def _context(prefix: str, producer: dict[str, Node], consumers: dict[str, list[Node]]) -> str:
    """The attention's output: what the layer's output projection multiplies."""
    matmul = _biased_matmul(f"{prefix}.output.dense.bias", producer, consumers)
    if matmul is None or matmul.inputs[0] not in producer:
        raise ModelError(f"ONNX file: unexpected layout of {prefix}.output")
    return matmul.inputs[0]


def _biased_matmul(
    bias: str, producer: dict[str, Node], consumers: dict[str, list[Node]]
) -> Node | None:
    """The ``MatMul`` whose output the ``Add`` of ``bias`` reads (a projection), if any."""
    add = next((n for n in consumers.get(bias, []) if n.op_type == "Add"), None)
    matmul = producer.get(add.inputs[0]) if add is not None else None
    return matmul if matmul is not None and matmul.op_type == "MatMul" else None


__all__ = [
    "FUSED_ENV",
    "NUM_HEADS",
    "RECIPE",
    "SESSION_CONFIG",
    "fused_enabled",
    "fused_model",
    "fused_name",
    "make_fused",
]
