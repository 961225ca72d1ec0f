"""The fused-attention graph against the shipped one: encoder CPU per text and closeness.

    PYTHONPATH=src python benchmarks/fuse9_screen.py [--queries 600] [--threads 1]
        [--spin] [--set bfcl] [--cache DIR]

Two ``MiniLMEmbedder`` of the default model, as the product makes them: the shipped graph
(``fused=False``) and the fused one (``embed/fused.py``), each from its kept optimised
graph in ``--cache`` (made there first when missing, outside the timing). One text a
call, in an order that alternates text by text; a seeded sample of a dev set's request
texts (no gold is read). Per graph: this thread's CPU per call (p50, mean) and wall time
(p50), the fused graph's ratio to the shipped one (of p50s, of means, and the median of
the per-text ratios), and how far its vectors are from the shipped graph's (largest
absolute difference of a component, least cosine, bit-identical count).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def texts(bench: Path, name: str, n: int) -> list[str]:
    lines = (bench / name / "queries.jsonl").read_text().splitlines()
    queries = [json.loads(line)["query"] for line in lines]
    random.Random(9).shuffle(queries)
    return queries[:n]


def measure(embedders: dict[str, Any], sample: Sequence[str]) -> dict[str, Any]:
    names = list(embedders)
    cpu: dict[str, list[float]] = {k: [] for k in names}
    wall: dict[str, list[float]] = {k: [] for k in names}
    vectors: dict[str, list[Any]] = {k: [] for k in names}
    for i, text in enumerate(sample):
        for name in names if i % 2 == 0 else names[::-1]:
            start, started = time.thread_time(), time.perf_counter()
            vec = embedders[name].embed([text])[0]
            cpu[name].append((time.thread_time() - start) * 1e3)
            wall[name].append((time.perf_counter() - started) * 1e3)
            vectors[name].append(vec)
    base = np.array(cpu[names[0]])
    shipped = np.array(vectors[names[0]])
    out: dict[str, Any] = {}
    for name in names:
        c, v = np.array(cpu[name]), np.array(vectors[name])
        out[name] = {
            "cpu_ms_p50": float(np.median(c)),
            "cpu_ms_mean": float(c.mean()),
            "wall_ms_p50": float(np.median(wall[name])),
            "ratio_p50": float(np.median(c) / np.median(base)),
            "ratio_mean": float(c.mean() / base.mean()),
            "ratio_per_text_median": float(np.median(c / base)),
            "max_abs_diff": float(np.abs(v - shipped).max()),
            "min_cosine": float((v * shipped).sum(axis=1).min()),
            "same_bits": sum(a.tobytes() == b.tobytes() for a, b in zip(v, shipped, strict=True)),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", type=Path, default=ROOT.parent / "shared" / "bench")
    ap.add_argument("--set", default="bfcl")
    ap.add_argument("--queries", type=int, default=600)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--spin", action="store_true", help="ONNX Runtime spin-waiting on")
    ap.add_argument("--cache", type=Path, default=None, help="model cache (default: a new one)")
    args = ap.parse_args(argv)
    from toolscout.embed.minilm import MiniLMEmbedder

    sample = texts(args.bench, args.set, args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache or Path(tmp)
        embedders = {
            name: MiniLMEmbedder(
                threads=args.threads, spin_wait=args.spin, model_cache=cache, fused=fused
            )
            for name, fused in (("shipped", False), ("fused", True))
        }
        for emb in embedders.values():
            emb.load()
            for text in sample[:20]:  # warm
                emb.embed([text])
        kinds = {name: emb.session_kind for name, emb in embedders.items()}
        result = measure(embedders, sample)
    print(json.dumps({"texts": len(sample), "threads": args.threads, "spin": args.spin,
                      "sessions": kinds, "graphs": result}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
