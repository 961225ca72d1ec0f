"""The query encoder's int8 graph, made locally from the shipped model's own weights.

The shipped all-MiniLM-L6-v2 file stores its weights as int8 but computes in float: ONNX
Runtime turns every weight back into float32 once at load, and every run multiplies in
float. :func:`quantised_model` rewrites the same weights as ONNX Runtime's dynamic int8
quantisation (``onnxruntime.quantization.quantize_dynamic``: int8 weights per output
channel, each run's activations quantised to uint8 on the fly; ``MatMulInteger``), except
each layer's feed-forward output projection, which stays float. It costs about 0.7 of the
float graph's CPU a text on this project's 2-core AVX2 machine (docs/history/http-load.md,
round five). Its vectors are close to the float graph's but not equal (cosine 0.989-1.0 over
dev-set requests), so it is used for *query* texts only: cards keep the vectors they were
indexed with, and the catalog's model id does not change.

Nothing is downloaded: the graph is made from the file the PyPI package installed, once,
and kept in the user cache directory (``$TOOLSCOUT_MODEL_CACHE`` overrides it) under a
name holding the source file's digest and the ONNX Runtime version, written atomically
with a sidecar holding its size and CRC-32 (:func:`toolscout.modelcache.keep_made`): a
cut-short or changed file is made again.
Making it needs the ``onnx`` package (a dependency of the ``int8`` extra).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from toolscout.errors import MissingExtraError, ModelError
from toolscout.modelcache import CACHE_ENV, keep_made, model_cache_dir, sidecar_holds

#: bumped whenever the recipe below changes, so an old file is never reused
RECIPE = "dq-s8-perchannel-ffnout-float-2"


def quantised_name(source_sha256: str) -> str:
    import onnxruntime

    return f"minilm-{source_sha256[:16]}-{RECIPE}-ort{onnxruntime.__version__}.onnx"


def quantised_model(source: Path, source_sha256: str, cache_dir: Path | None = None) -> Path:
    """The int8 query graph of ``source`` (whose digest the caller checked), made once."""
    where = cache_dir if cache_dir is not None else model_cache_dir()
    target = where / quantised_name(source_sha256)
    if sidecar_holds(target):
        return target
    try:
        keep_made(target, lambda tmp: _make(source, tmp), recipe=RECIPE)
    except OSError as exc:
        raise ModelError(
            f"cannot keep the int8 query graph in the model cache {where}: {exc}"
        ) from exc
    return target


def _make(source: Path, target: Path) -> None:
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ModuleNotFoundError as exc:
        raise MissingExtraError("onnx (to make the int8 query encoder)", "int8") from exc
    model = onnx.load(str(source))
    _fold_weights(model)
    keep_float = _narrowing_matmuls(model)
    root = logging.getLogger()
    root.addFilter(_no_preprocessing_advice)  # the quantiser logs it on the root logger
    try:
        quantize_dynamic(
            model,
            str(target),
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=keep_float,
        )
    finally:
        root.removeFilter(_no_preprocessing_advice)


def _narrowing_matmuls(model: Any) -> list[str]:
    """The MatMuls whose weight narrows its input (each layer's feed-forward output
    projection, 1,536 → 384): left in float. Quantising them too moved the request
    vectors most (cosine mean 0.9938 against 0.9963) and cost metatool 0.009 recall@5
    against 0.002 without them (docs/history/http-load.md, round five)."""
    inits = {i.name: tuple(i.dims) for i in model.graph.initializer}
    return [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul"
        and len(dims := inits.get(node.input[1], ())) == 2
        and dims[0] > dims[1]
    ]


def _no_preprocessing_advice(record: logging.LogRecord) -> bool:
    return "pre-processing before quantization" not in record.getMessage()


def _fold_weights(model: Any) -> None:
    """Turn the shipped graph's ``Cast(int8 weight) * scale`` pairs into float initializers
    (exactly the float weights ONNX Runtime computes at load), so that the quantiser sees
    the MatMuls' weights as constants."""
    import numpy as np
    from onnx import numpy_helper

    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    casts = {n.output[0]: n for n in graph.node if n.op_type == "Cast" and n.input[0] in inits}
    kept: list[Any] = []
    folded: list[Any] = []
    dropped: set[str] = set()
    for node in graph.node:
        if node.op_type == "Cast" and node.input[0] in inits:
            continue
        cast = casts.get(node.input[0]) if node.op_type == "Mul" else None
        if cast is not None and node.input[1] in inits:
            q = numpy_helper.to_array(inits[cast.input[0]]).astype(np.float32)
            scale = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
            folded.append(numpy_helper.from_array((q * scale).astype(np.float32), node.output[0]))
            dropped.update((cast.input[0], node.input[1]))
            continue
        kept.append(node)
    used = {name for node in kept for name in node.input}
    unfolded = [n.output[0] for n in casts.values() if n.output[0] in used]
    if unfolded:  # a Cast whose Mul was not a scale: the file is not the one this expects
        raise ModelError(f"unexpected weight layout in the model ({unfolded[0]})")
    rest = [i for i in graph.initializer if i.name not in dropped]
    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend(rest + folded)


__all__ = ["CACHE_ENV", "RECIPE", "model_cache_dir", "quantised_model", "quantised_name"]
