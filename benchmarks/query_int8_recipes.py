"""Cheaper query graphs of the default model, screened against the shipped float graph.

    PYTHONPATH=src python benchmarks/query_int8_recipes.py build --out DIR [RECIPE ...]
    PYTHONPATH=src python benchmarks/query_int8_recipes.py screen --graphs DIR [--texts N]
        [--timed N] [--only a,b]

``build`` makes each recipe's ONNX file from the shipped file's weights (folded to float,
as ``embed/quantise.py`` does). Recipes (names are parsed):

- ``s8pc`` / ``u8pc``: ``quantize_dynamic``, 8-bit weights per output channel, int8
  (symmetric) or uint8 (asymmetric); ``_ffnf``: each feed-forward output projection float;
  ``_rr``: ``reduce_range`` (7-bit weights); ``_ex_K+K``: MatMuls of those kinds (``qkv``,
  ``ao`` attention output, ``fi`` feed-forward input, ``fo``) or layers (``L0``–``L5``) float;
- ``nbB_bS_aA``: ``MatMulNBits``, B-bit weights in blocks of S, symmetric,
  ``accuracy_level`` A (4: activations quantised to int8 per block);
- ``nb8x_bS_aA``: the same with the shipped int8 weights exactly (each column's int8
  values plus 128 against the default zero point 128, its scale repeated in every block:
  no weight is rounded again; only the activations are quantised);
- ``fused``: the product's fused-attention graph (``embed/fused.py``) as it runs today;
  ``f`` before any recipe above (``fnb8x_b32_a4``): the recipe over the fused graph (each
  layer's Q/K/V weight stays float inside its ``Attention`` node); every ``f`` graph is
  screened with ``fused.SESSION_CONFIG`` unless its name ends in ``_sln`` (ONNX Runtime's
  SkipLayerNorm fusion left on: the same file);
- ``sqNN_s8|u8[_ffnf]``: SmoothQuant with alpha NN/100 (a ``Mul`` by 1/s before each
  weight MatMul's input, its rows times s; s from the activations' per-channel maximum
  over the demo catalog's summaries, aliases and not-for hints), then ``s8pc``/``u8pc``.

``screen`` encodes dev texts with the shipped float graph and every built file: per
graph, the cosine to the float vector (min, 1st percentile, mean) and the encoder's CPU ms
p50 (one intra-op thread, no spinning, one text a run, graphs interleaved text by text,
this thread's CPU; the first ``--timed`` texts of a seeded shuffle). The dev texts are
not the quality runs' queries: for the four sets with more than 500 queries, 150 queries
each outside the seeded 500 that ``query_int8.py --limit 500`` scores, and 100 tool
descriptions of every set (seeded).
No gold is read.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality  # noqa: E402

KINDS = ("qkv", "ao", "fi", "fo")


def fused_options(graph: Path) -> bool:
    """Whether a recipe's file is screened with the fused graph's session options
    (``fused.SESSION_CONFIG``): a recipe over the fused graph (its name starts with ``f``)
    unless its name ends in ``_sln``."""
    return graph.stem.startswith("f") and not graph.stem.endswith("_sln")


def _folded(fused: bool = False) -> Any:
    import onnx

    from toolscout.embed import quantise
    from toolscout.embed.fused import make_fused
    from toolscout.embed.minilm import default_model_path

    path = default_model_path()
    model = onnx.load_from_string(make_fused(path.read_bytes())) if fused else onnx.load(str(path))
    quantise._fold_weights(model)
    return model


def _shipped_int8() -> dict[str, tuple[Any, Any]]:
    """Every shipped weight's int8 values and per-column scales, by the folded weight's name."""
    import onnx
    from onnx import numpy_helper

    from toolscout.embed.minilm import default_model_path

    inits = {i.name: i for i in onnx.load(str(default_model_path())).graph.initializer}
    return {
        name.removesuffix("_q"): (
            numpy_helper.to_array(inits[name]),
            numpy_helper.to_array(inits[name.removesuffix("_q") + "_scale"]).reshape(-1),
        )
        for name in inits
        if name.endswith("_q") and name.removesuffix("_q") + "_scale" in inits
    }


def _weight_matmuls(model: Any) -> tuple[list[Any], dict[str, Any]]:
    inits = {i.name: i for i in model.graph.initializer}
    nodes = [
        n
        for n in model.graph.node
        if n.op_type == "MatMul" and n.input[1] in inits and len(inits[n.input[1]].dims) == 2
    ]
    return nodes, inits


def _kinds_and_layers(model: Any) -> tuple[dict[str, str], dict[str, int]]:
    nodes, inits = _weight_matmuls(model)
    producer = {o: n for n in model.graph.node for o in n.output}
    kind: dict[str, str] = {}
    for n in nodes:
        k_in, n_out = inits[n.input[1]].dims
        if k_in > n_out:
            kind[n.name] = "fo"
        elif n_out > k_in:
            kind[n.name] = "fi"
        else:
            kind[n.name] = "ao" if producer[n.input[0]].op_type == "Reshape" else "qkv"
    layer: dict[str, int] = {}
    at, prev = -1, "fo"
    for n in nodes:
        if kind[n.name] == "qkv" and prev == "fo":
            at += 1
        layer[n.name], prev = max(at, 0), kind[n.name]
    return kind, layer


def _dynamic(model: Any, target: Path, weights: str, exclude: list[str], rr: bool) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        model,
        str(target),
        op_types_to_quantize=["MatMul"],
        per_channel=True,
        reduce_range=rr,
        weight_type=QuantType.QInt8 if weights == "s8" else QuantType.QUInt8,
        nodes_to_exclude=exclude,
    )


def _exact8(w: Any, shipped: tuple[Any, Any], block: int) -> tuple[Any, Any]:
    """The shipped weight (``shipped``: its int8 values and one scale a column; ``w``: the
    two folded) as 8-bit ``MatMulNBits`` blocks with no rounding: (packed ``[N, blocks,
    block]``, scales)."""
    q, scale = shipped[0].astype(np.int32), shipped[1].astype(np.float32)
    k_in, n_out = w.shape
    if q.shape != w.shape or not np.array_equal((q * scale).astype(np.float32), w):
        raise SystemExit("the folded weight is not the shipped int8 values times their scales")
    packed = (q + 128).astype(np.uint8).T.reshape(n_out, k_in // block, block)
    return packed, np.repeat(scale[:, None], k_in // block, axis=1).astype(np.float32)


def _nbits(
    model: Any, target: Path, bits: int, block: int, accuracy: int, exact: bool = False
) -> None:
    import onnx
    from onnx import helper, numpy_helper
    from onnxruntime.capi._pybind_state import quantize_matmul_4bits, quantize_matmul_8bits

    nodes, inits = _weight_matmuls(model)
    graph = model.graph
    replaced: dict[str, Any] = {}
    shipped = _shipped_int8() if exact else {}
    for node in nodes:
        w = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
        k_in, n_out = w.shape
        blocks, per_byte = (k_in + block - 1) // block, 8 // bits
        packed = np.zeros((n_out, blocks, (block + per_byte - 1) // per_byte), dtype=np.uint8)
        zero = np.zeros((n_out, (blocks + per_byte - 1) // per_byte), dtype=np.uint8)
        scales = np.zeros((n_out, blocks), dtype=np.float32)
        quant = quantize_matmul_8bits if bits == 8 else quantize_matmul_4bits
        if exact:
            packed, scales = _exact8(w, shipped[inits[node.input[1]].name], block)
        else:
            quant(packed, np.ascontiguousarray(w), scales, zero, block, n_out, k_in, True)
        name = inits[node.input[1]].name
        graph.initializer.extend([
            numpy_helper.from_array(packed, name + "_Q"),
            numpy_helper.from_array(scales, name + "_S"),
        ])  # fmt: skip
        attrs = {"K": k_in, "N": n_out, "bits": bits, "block_size": block}
        if accuracy:
            attrs["accuracy_level"] = accuracy
        replaced[node.name] = helper.make_node(
            "MatMulNBits",
            [node.input[0], name + "_Q", name + "_S"],
            list(node.output),
            name=node.name + "_nbits",
            domain="com.microsoft",
            **attrs,
        )
    kept = [replaced.get(n.name, n) for n in graph.node]
    del graph.node[:]
    graph.node.extend(kept)
    used = {i for n in graph.node for i in n.input}
    live = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(live)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(model, str(target))


def _calibration_texts() -> list[str]:
    import yaml

    texts: list[str] = []
    folder = resources.files("toolscout.data").joinpath("demo_catalog")
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".yaml"):
            continue
        for tool in yaml.safe_load(item.read_text()).get("tools", []) or []:
            texts += [tool.get("summary", ""), *tool.get("aliases", []), *tool.get("not_for", [])]
    return [t for t in texts if t.strip()]


def _activation_max(model: Any, texts: Sequence[str]) -> dict[str, Any]:
    import onnx
    import onnxruntime as ort
    from onnx import helper

    nodes, _ = _weight_matmuls(model)
    inputs = sorted({n.input[0] for n in nodes})
    probe = copy.deepcopy(model)
    for x in inputs:
        probe.graph.output.append(helper.make_tensor_value_info(x, onnx.TensorProto.FLOAT, None))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(probe.SerializeToString(), opts, ["CPUExecutionProvider"])
    from toolscout.embed.minilm import load_tokenizer

    tok = load_tokenizer(128)
    peak: dict[str, Any] = {}
    for text in texts:
        ids = np.array([tok.encode(text).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        feeds["token_type_ids"] = np.zeros_like(ids)
        for x, value in zip(inputs, session.run(inputs, feeds), strict=True):
            top = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0)
            peak[x] = top if x not in peak else np.maximum(peak[x], top)
    return peak


def _smoothed(model: Any, alpha: float) -> Any:
    from onnx import helper, numpy_helper

    peak = _activation_max(model, _calibration_texts())
    nodes, inits = _weight_matmuls(model)
    by_input: dict[str, list[Any]] = {}
    for n in nodes:
        by_input.setdefault(n.input[0], []).append(n)
    graph = model.graph
    position = {o: i for i, n in enumerate(graph.node) for o in n.output}
    inserts: list[tuple[int, Any]] = []
    for x, users in by_input.items():
        w_max = np.max(
            [np.abs(numpy_helper.to_array(inits[n.input[1]])).max(axis=1) for n in users], axis=0
        )
        s = (np.maximum(peak[x], 1e-5) ** alpha / np.maximum(w_max, 1e-5) ** (1 - alpha)).astype(
            np.float32
        )
        for n in users:
            w = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32) * s[:, None]
            inits[n.input[1]].CopyFrom(numpy_helper.from_array(w, n.input[1]))
            n.input[0] = x + "_smoothed"
        graph.initializer.append(numpy_helper.from_array((1.0 / s).astype(np.float32), x + "_inv"))
        mul = helper.make_node("Mul", [x, x + "_inv"], [x + "_smoothed"], name=x + "_smooth")
        inserts.append((position[x] + 1, mul))
    ordered = list(graph.node)
    for at, mul in sorted(inserts, key=lambda e: -e[0]):
        ordered.insert(at, mul)
    del graph.node[:]
    graph.node.extend(ordered)
    return model


def build(recipe: str, out: Path) -> Path:
    """Make one recipe's file under ``out``."""
    target = out / f"{recipe}.onnx"
    name = recipe.removesuffix("_sln")
    if name == "fused":
        from toolscout.embed.fused import make_fused
        from toolscout.embed.minilm import default_model_path

        target.write_bytes(make_fused(default_model_path().read_bytes()))
        return target
    fused = name.startswith("f")
    name = name[1:] if fused else name
    model = _folded(fused)
    parts = name.split("_")
    if name.startswith("nb"):
        exact = parts[0].endswith("x")
        bits = int(parts[0][2:].removesuffix("x"))
        block, accuracy = int(parts[1][1:]), int(parts[2][1:])
        if exact and bits != 8:
            raise SystemExit(f"{recipe}: exact weights are 8-bit only")
        _nbits(model, target, bits, block, accuracy, exact)
        return target
    if name.startswith("sq"):
        model = _smoothed(model, int(parts[0][2:]) / 100)
        parts = parts[1:]
    weights = parts[0][:2]
    kind, layer = _kinds_and_layers(model)
    dropped: set[str] = set()
    if "ffnf" in parts:
        dropped.add("fo")
    if "ex" in parts:
        dropped.update(parts[parts.index("ex") + 1].split("+"))
    exclude = [n for n in kind if kind[n] in dropped or f"L{layer[n]}" in dropped]
    _dynamic(model, target, weights, exclude, rr="rr" in parts)
    return target


def dev_texts(bench: Path, limit: int = 500) -> list[str]:
    """Queries outside each large set's scored sample, and tool descriptions (seeded)."""
    from toolscout.evaluate.evalset import read_queries, sample

    pick = random.Random(7)
    texts: list[str] = []
    for d in quality.bench_sets(bench):
        queries = read_queries(d / "queries.jsonl")
        if len(queries) > limit:
            scored = {q.id for q in sample(queries, limit)}
            rest = [q.query for q in queries if q.id not in scored]
            texts += pick.sample(rest, min(150, len(rest)))
        tools = [json.loads(line) for line in (d / "tools.jsonl").open()]
        described = [t["description"] for t in tools if str(t.get("description") or "").strip()]
        texts += pick.sample(described, min(100, len(described)))
    pick.shuffle(texts)  # so that the timed first ones mix every set
    return texts


def screen(graphs: dict[str, Path], texts: Sequence[str], timed: int) -> dict[str, Any]:
    import onnxruntime as ort

    from toolscout.embed.fused import SESSION_CONFIG
    from toolscout.embed.minilm import _pooled, default_model_path, load_tokenizer

    def session(path: Path) -> Any:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if fused_options(path):
            for key, value in SESSION_CONFIG.items():
                opts.add_session_config_entry(key, value)
        return ort.InferenceSession(str(path), opts, ["CPUExecutionProvider"])

    def vector(s: Any, ids: Any) -> Any:
        mask = np.ones_like(ids)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = s.run(["last_hidden_state"], feeds)
        return _pooled(hidden, mask)[0]

    tok = load_tokenizer(128)
    ids = [np.array([tok.encode(t).ids], dtype=np.int64) for t in texts]
    sessions = {"float": session(default_model_path())}
    sessions.update({name: session(path) for name, path in graphs.items()})
    ref = np.stack([vector(sessions["float"], i) for i in ids])
    out: dict[str, Any] = {}
    for name in graphs:
        cos = (np.stack([vector(sessions[name], i) for i in ids]) * ref).sum(axis=1)
        out[name] = {
            "cosine_min": float(cos.min()),
            "cosine_p1": float(np.percentile(cos, 1)),
            "cosine_mean": float(cos.mean()),
        }
    spent: dict[str, list[float]] = {name: [] for name in sessions}
    order = list(sessions)
    for n, each in enumerate(ids[:timed]):
        for name in order if n % 2 == 0 else order[::-1]:
            start = time.thread_time()
            vector(sessions[name], each)
            spent[name].append((time.thread_time() - start) * 1e3)
    base = float(np.median(spent["float"]))
    out["float"] = {"ms_p50": base}
    for name in graphs:
        out[name]["ms_p50"] = float(np.median(spent[name]))
        out[name]["of_float"] = out[name]["ms_p50"] / base
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("recipes", nargs="*", default=["s8pc", "s8pc_ffnf", "u8pc", "u8pc_ffnf"])
    s = sub.add_parser("screen")
    s.add_argument("--graphs", type=Path, required=True)
    s.add_argument("--only", default="")
    s.add_argument("--texts", type=int, default=1200)
    s.add_argument("--timed", type=int, default=200)
    s.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    args = ap.parse_args(argv)
    if args.step == "build":
        args.out.mkdir(parents=True, exist_ok=True)
        for recipe in args.recipes:
            print(build(recipe, args.out), flush=True)
        return 0
    only = {n for n in args.only.split(",") if n}
    graphs = {p.stem: p for p in sorted(args.graphs.glob("*.onnx")) if not only or p.stem in only}
    texts = dev_texts(args.bench)[: args.texts]
    got = screen(graphs, texts, args.timed)
    print(f"{len(texts)} dev texts; CPU ms p50 over the first {args.timed}")
    print("| graph | cosine min / 1st pct / mean | CPU ms p50 | of float |")
    print("|---|---|---|---|")
    print(f"| float (shipped) | 1 | {got['float']['ms_p50']:.2f} | 1.00 |")
    for name in graphs:
        g = got[name]
        print(
            f"| {name} | {g['cosine_min']:.4f} / {g['cosine_p1']:.4f} / {g['cosine_mean']:.4f} "
            f"| {g['ms_p50']:.2f} | {g['of_float']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
