"""The int8 query encoder: what it costs in recall@5 on every dev set, and what it saves.

    PYTHONPATH=src python benchmarks/query_int8.py [--bench DIR] [--cache DIR] [--limit N]

Every set is indexed once with the shipped (float) encoder; its cards keep those vectors.
Every query then goes through ``Catalog.discover(k=10, tier="progressive")`` with the
product defaults twice, interleaved query by query, with the query-vector cache cleared
before each: its text encoded by the float graph, and by the int8 graph of the same
weights (``embed/quantise.py``) through :class:`~toolscout.embed.queries.QuerySide`.
Beside recall@5 of both, the cosine between the two query vectors and the encoders' CPU
time (one text a call, this thread's CPU). Writes ``benchmarks/results/query_int8.json``
and prints the table docs/benchmarks.md shows (HTTP load, round five).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality  # noqa: E402
from encoder_skip import recall  # noqa: E402

#: a set may lose at most this much recall@5 for the int8 query encoder to be the default
MAX_LOSS = 0.005


def _cpu_embed(embedder: Any, text: str) -> tuple[Any, float]:
    start = time.thread_time()
    vec = embedder.embed([text])[0]
    return vec, (time.thread_time() - start) * 1e3


def measure_set(d: Path, workdir: Path, limit: int | None, cards: Any, queries: Any) -> list[Any]:
    """Per query: recall@5 with each query encoder, their vectors' cosine, their CPU ms."""
    from toolscout.discovery.catalog import Catalog
    from toolscout.discovery.search import clear_query_cache
    from toolscout.embed.queries import QuerySide
    from toolscout.evaluate.harness import eval_principal

    rows: list[Any] = []
    split_embedder = QuerySide(cards, queries)
    with (
        quality.opened_set(d, workdir, limit, cards, index=True) as (plain, scored),
        Catalog.open(workdir / f"{d.name}.db", embedder=split_embedder, log=False) as split,
    ):
        principal = eval_principal(plain)
        for q in scored:
            got = []
            for cat in (plain, split):
                clear_query_cache()
                shortlist = cat.discover(q.query, principal, k=10, tier="progressive", record=False)
                got.append(shortlist.ids)
            v_float, ms_float = _cpu_embed(cards, q.query)
            v_int8, ms_int8 = _cpu_embed(queries, q.query)
            rows.append({
                "float": recall(got[0], q.gold),
                "int8": recall(got[1], q.gold),
                "cosine": float(np.dot(v_float, v_int8)),
                "cpu_ms_float": ms_float,
                "cpu_ms_int8": ms_int8,
            })  # fmt: skip
    return rows


def summary(rows: Sequence[Any]) -> dict[str, float]:
    n = max(len(rows), 1)
    base = sum(r["float"] for r in rows) / n
    int8 = sum(r["int8"] for r in rows) / n
    return {
        "queries": len(rows),
        "recall_float": base,
        "recall_int8": int8,
        "loss": base - int8,
        "cosine_min": min((r["cosine"] for r in rows), default=1.0),
        "cosine_mean": sum(r["cosine"] for r in rows) / n,
        "cpu_ms_float": float(np.median([r["cpu_ms_float"] for r in rows])),
        "cpu_ms_int8": float(np.median([r["cpu_ms_int8"] for r in rows])),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    ap.add_argument("--cache", type=Path, default=None, help="keep the indexed sets here")
    ap.add_argument("--limit", type=int, default=None, help="queries per set (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "query_int8.json")
    args = ap.parse_args(argv)
    from toolscout.embed.minilm import MiniLMEmbedder

    # one thread each, as a `serve --workers 2` worker runs them on 2 cores
    cards = MiniLMEmbedder(threads=1, spin_wait=False)
    queries = MiniLMEmbedder(threads=1, spin_wait=False, quantised=True)
    per_set: dict[str, list[Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = args.cache or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for d in quality.bench_sets(args.bench):
            per_set[d.name] = measure_set(d, work, args.limit, cards, queries)
            print(f"{d.name}: {json.dumps(summary(per_set[d.name]))}", flush=True)
    sums = {n: summary(r) for n, r in per_set.items()}
    worst = max(s["loss"] for s in sums.values())
    print("| set | queries | recall@5, float query encoder | int8 query encoder | loss "
          "| query cosine min / mean | encoder CPU ms p50, float → int8 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, s in sums.items():
        print(
            f"| {name} | {s['queries']} | {s['recall_float']:.4f} | {s['recall_int8']:.4f} | "
            f"{s['loss']:+.4f} | {s['cosine_min']:.4f} / {s['cosine_mean']:.4f} | "
            f"{s['cpu_ms_float']:.2f} → {s['cpu_ms_int8']:.2f} |"
        )
    verdict = "may be the default" if worst <= MAX_LOSS else "may NOT be the default"
    print(f"largest loss {worst:+.4f} (limit {MAX_LOSS}): the int8 query encoder {verdict}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    shown = sys.argv[1:] if argv is None else argv
    args.out.write_text(json.dumps({
        "command": quality.command_line("benchmarks/query_int8.py", shown),
        "max_loss": MAX_LOSS,
        "largest_loss": worst,
        "sets": sums,
        "rows": per_set,
    }, indent=1) + "\n")  # fmt: skip
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
