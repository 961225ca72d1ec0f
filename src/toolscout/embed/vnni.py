"""The query encoder's graph on CPUs with VNNI: the fused graph with 8-bit block-wise MatMuls.

Made locally from the shipped file, as the fused graph is (``embed/fused.py``, whose
rewrite it starts from): every weight ``MatMul`` left after the attention is fused (each
layer's attention output and feed-forward projections) becomes one ONNX Runtime
``MatMulNBits`` node, 8-bit weights in blocks of :data:`BLOCK` along the input with
``accuracy_level`` 4 (each run's activations quantised to int8 per block, the products
summed in int32 by the CPU's VNNI dot-product instructions). The weights are the shipped
file's own int8 values, exactly: each column's values plus 128 against ``MatMulNBits``'s
default zero point of 128, the column's scale repeated in each of its blocks. Only the
activations are rounded, per block of 64 of a token's inputs, so the vectors are near the
float graph's (cosine to the shipped graph's at least 0.9994, mean 0.9999, over 1,188 dev
texts; docs/history/http-load.md, h/enc15). Each layer's Q/K/V weight stays float inside
its fused ``Attention`` node.

**Only where the CPU has VNNI** (``avx512_vnni`` or ``avx_vnni`` among /proc/cpuinfo's
flags, :func:`has_vnni`): there it costs about 0.77 of the fused graph's CPU a text (0.66
of the shipped graph's; AVX-512 VNNI, one thread). Without VNNI ONNX Runtime's block-wise
int8 kernels are slower than float: round twelve measured the same kind of graph at 1.2×
the float graph's CPU on an AVX2 machine without VNNI, so there the fused graph encodes
requests whatever the switch says.

**Off by default** (``$TOOLSCOUT_VNNI_QUERIES=1`` turns it on, :data:`DEFAULT_ON`): near is
not exact enough for the six-set rule. One restbench request of 155 (0.0065 recall@5 and
complete@5; the rule allows 0.002) loses its gold tool from the top 5 with every block size
tried (16, 32, 64), its gold at 5th place among candidates whose scores differ by 1e-4; on
the other five sets at most 0.002 (docs/history/http-load.md, h/enc15). With it on, it
encodes *requests* only (the ``query_side`` of :class:`~toolscout.embed.minilm.MiniLMEmbedder`);
cards keep the fused/float graph's vectors and the catalog's model id does not change.
Nothing is downloaded; the graph is kept in the model cache beside the fused one under a
name holding the source's digest and :data:`RECIPE` (with its sidecar check), its optimised
session graph kept as any other (``embed/session.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import numpy as np

from toolscout.embed import onnxwire as wire
from toolscout.embed.fused import make_fused
from toolscout.embed.onnxwire import Node, Tensor
from toolscout.errors import ConfigError, ModelError
from toolscout.modelcache import cached_or_made, model_cache_dir

#: ``1`` turns the VNNI query graph on where the CPU has VNNI, ``0`` off; unset:
#: :data:`DEFAULT_ON` (off: requests are encoded by the cards' graph)
VNNI_ENV = "TOOLSCOUT_VNNI_QUERIES"
#: off until a graph passes the six-set rule (see the module: restbench loses one query)
DEFAULT_ON = False
#: the weights' and the activations' block along a MatMul's input (64: the screen's best
#: near-exact choice; 32 was 0.12 slower, 128 further from float)
BLOCK = 64
#: bumped whenever the rewrite changes, so an older made file is never read
RECIPE = f"attn-fused-1-nb8x-b{BLOCK}-a4-1"
#: the CPU flags whose presence makes the graph the query encoder
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni"})

_UINT8 = 2
#: what reads the CPU's feature flags (injectable for tests)
FlagsReader = Callable[[], frozenset[str]]


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (Linux; empty elsewhere or unreadable)."""
    with suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("flags"):
                return frozenset(line.partition(":")[2].split())
    return frozenset()


def has_vnni(flags: frozenset[str]) -> bool:
    """Whether ``flags`` name an x86 VNNI dot-product extension."""
    return not VNNI_FLAGS.isdisjoint(flags)


def vnni_enabled(read_flags: FlagsReader = cpu_flags) -> bool:
    """Whether requests get this graph: :data:`VNNI_ENV` (else :data:`DEFAULT_ON`) turns it
    on and the CPU has VNNI (the flags are read only when the switch is on); ConfigError
    for a value other than ``0`` or ``1``."""
    text = os.environ.get(VNNI_ENV, "").strip()
    if text not in ("", "0", "1"):
        raise ConfigError(f"${VNNI_ENV} must be 0 or 1, not {text!r}")
    if not (text == "1" if text else DEFAULT_ON):
        return False
    return has_vnni(read_flags())


def vnni_name(source_sha256: str) -> str:
    return f"minilm-{source_sha256[:16]}-{RECIPE}.onnx"


def vnni_model(source: Path, source_sha256: str, cache_dir: Path | None = None) -> Path | bytes:
    """The VNNI query graph of ``source`` (whose digest the caller checked): the cached
    file when its check holds, else made and kept there; its bytes when the cache cannot
    be written (this process only)."""
    where = cache_dir if cache_dir is not None else model_cache_dir()
    return cached_or_made(
        where / vnni_name(source_sha256), lambda: make_vnni(source.read_bytes()), recipe=RECIPE
    )


def make_vnni(shipped: bytes, block: int = BLOCK) -> bytes:
    """The rewrite (see the module): the fused graph with its weight MatMuls block-wise."""
    model, graph, nodes, inits = wire.read_graph(make_fused(shipped))
    producer = {o: node for node in nodes for o in node.outputs}
    added: list[Tensor] = []
    body: list[Node] = []
    replaced = 0
    for node in nodes:
        weight = _int8_weight(node, producer, inits)
        if weight is None:
            body.append(node)
            continue
        q, scale = weight
        k_in, n_out = q.shape
        if k_in % block:
            raise ModelError(f"ONNX file: {node.name}'s input width {k_in} is not in blocks")
        blocks = k_in // block
        packed = (q.astype(np.int16) + 128).astype(np.uint8).T.reshape(n_out, blocks, block)
        scales = np.repeat(scale.reshape(n_out, 1), blocks, axis=1).astype(np.float32)
        name = f"toolscout_nb_{replaced}"
        added += [
            Tensor(f"{name}_q", _UINT8, list(packed.shape), packed.tobytes()),
            Tensor(f"{name}_scale", wire.FLOAT, list(scales.shape), scales.tobytes()),
        ]
        attrs = {"K": k_in, "N": n_out, "bits": 8, "block_size": block, "accuracy_level": 4}
        body.append(
            Node(
                "MatMulNBits",
                [node.inputs[0], f"{name}_q", f"{name}_scale"],
                list(node.outputs),
                f"toolscout_matmul_nbits_{replaced}",
                "com.microsoft",
                [wire.int_attribute(k, v) for k, v in attrs.items()],
            )
        )
        replaced += 1
    if not replaced:
        raise ModelError("ONNX file: no int8 weight MatMuls found where the model has them")
    inits.update((t.name, t) for t in added)
    return wire.encode(wire.with_graph(model, graph, body, inits))


def _int8_weight(
    node: Node, producer: dict[str, Node], inits: dict[str, Tensor]
) -> tuple[np.ndarray, np.ndarray] | None:
    """A ``MatMul``'s weight as the shipped file stores it (``Mul(Cast(int8), scale)``, one
    scale a column): its int8 values and scales; None for any other node."""
    if node.op_type != "MatMul" or len(node.inputs) != 2:
        return None
    mul = producer.get(node.inputs[1])
    if mul is None or mul.op_type != "Mul":
        return None
    cast = producer.get(mul.inputs[0])
    if cast is None or cast.op_type != "Cast" or cast.inputs[0] not in inits:
        return None
    q, scale = inits[cast.inputs[0]], inits.get(mul.inputs[1])
    if q.data_type != wire.INT8 or len(q.dims) != 2 or scale is None:
        return None
    if scale.data_type != wire.FLOAT or int(np.prod(scale.dims)) != q.dims[1]:
        raise ModelError(f"ONNX file: unexpected scales of weight {q.name}")
    values = np.frombuffer(q.raw, dtype=np.int8).reshape(q.dims)
    return values, np.frombuffer(scale.raw, dtype=np.float32)


__all__ = [
    "BLOCK",
    "DEFAULT_ON",
    "RECIPE",
    "VNNI_ENV",
    "VNNI_FLAGS",
    "cpu_flags",
    "has_vnni",
    "make_vnni",
    "vnni_enabled",
    "vnni_model",
    "vnni_name",
]
