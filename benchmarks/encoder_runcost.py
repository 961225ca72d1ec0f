"""One query-encoder run's cost against its padded tokens: what a run costs besides its
tokens, and what a token costs.

    PYTHONPATH=src python benchmarks/encoder_runcost.py --threads 1     # as a serve worker runs it
    PYTHONPATH=src python benchmarks/encoder_runcost.py --threads 0     # the library's default

The default MiniLM embedder (the product's graph: fused attention unless
``TOOLSCOUT_FUSED_ATTENTION=0``) runs batches of ``rows`` copies of one text of ``width``
word pieces, for the shapes below, three rounds; each shape's CPU and wall time a run is
the median of its rounds (each round the mean of ``--runs`` runs after three warm-up runs).
A least-squares line over the shapes gives the cost of a run as ``a + b × rows × width``:
``a / b`` is ``discovery``'s run-grouping constant in tokens (``embed.minilm.RUN_COST_TOKENS``).
Prints a table and writes JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

SHAPES = [(1, 8), (1, 16), (1, 32), (2, 16), (2, 32), (3, 24), (4, 16), (4, 32), (8, 16)]
WORDS = (
    "find the invoice for a customer and refund the last order then notify the team by "
    "email about the status of the payment before the end of the week please"
).split()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads; 0: the default")
    ap.add_argument("--runs", type=int, default=40, help="runs a shape a round")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    from toolscout.embed.minilm import MiniLMEmbedder

    if args.threads:
        emb = MiniLMEmbedder(threads=args.threads, spin_wait=False)
    else:
        emb = MiniLMEmbedder()
    emb.load()
    got: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for _ in range(3):
        for rows, width in SHAPES:
            enc = emb._tokenize([" ".join(WORDS[: max(1, width - 2)])])[0]
            batch = [enc] * rows
            for _ in range(3):
                emb._run(batch)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for _ in range(args.runs):
                emb._run(batch)
            cpu = (time.process_time() - cpu0) / args.runs * 1e3
            wall = (time.perf_counter() - wall0) / args.runs * 1e3
            got.setdefault((rows, len(enc.ids)), []).append((cpu, wall))
    rows_out = []
    print(f"{'rows':>4} {'width':>5} {'padded':>6} {'cpu ms':>8} {'wall ms':>8}")
    for (rows, width), seen in sorted(got.items()):
        cpu = statistics.median(c for c, _ in seen)
        wall = statistics.median(w for _, w in seen)
        rows_out.append({"rows": rows, "width": width, "cpu_ms": cpu, "wall_ms": wall})
        print(f"{rows:>4} {width:>5} {rows * width:>6} {cpu:>8.2f} {wall:>8.2f}")
    x = np.array([[1.0, r["rows"] * r["width"]] for r in rows_out])
    fits = {}
    for what in ("cpu_ms", "wall_ms"):
        (a, b), *_ = np.linalg.lstsq(x, np.array([r[what] for r in rows_out]), rcond=None)
        fits[what] = {"run_ms": float(a), "token_ms": float(b), "run_in_tokens": float(a / b)}
        print(f"{what}: a run {a:.2f} ms + {b:.3f} ms a padded token (a run = {a / b:.1f} tokens)")
    if args.out is not None:
        meta = {"threads": args.threads, "runs": args.runs, "fused": emb.fused}
        args.out.write_text(json.dumps({"meta": meta, "shapes": rows_out, "fits": fits}, indent=1))
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
