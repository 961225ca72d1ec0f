"""The one-task rule of discovery/orders.py measured on top of a finished ``orders.py`` run.

``orders.py`` forced each single order on every request; a pair "a/b" (one-part requests
in a, requests in several parts in b unless their sure parts agree on one tool) needs its
own run. This runs the pairs the margin grid can pick (:data:`PAIRS`) on the same seeded
queries and held-out constants, then chooses the margin leave-one-set-out again with them
(a pair not run, none on the grid of the six dev sets, falls back to ``orders.py``'s
per-query combination).

Run: ``PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/orders_gate.py --limit 200
--cache DIR --first benchmarks/results/orders.json``; writes
``benchmarks/results/orders_gate.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from orders import MARGINS, PARTS, mean, per_query  # noqa: E402
from quality import (  # noqa: E402
    DEFAULT_BENCH,
    bench_sets,
    command_line,
    confidence_model,
    held_settings,
    opened_set,
)

#: the pairs of orders the margin grid picks on the dev sets' evidence
PAIRS = ("ranker/bm25", "ranker/lead", "lead/bm25")


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--cache", type=Path, required=True, help="the indexed sets")
    parser.add_argument("--fits", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument("--first", type=Path, default=ROOT / "benchmarks/results/orders.json")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/orders_gate.json")
    args = parser.parse_args(args_list)

    from toolscout.discovery.orders import SHAPES, choose
    from toolscout.embed.minilm import MiniLMEmbedder

    fits = json.loads(args.fits.read_text(encoding="utf-8"))["fits"]
    first = json.loads(args.first.read_text(encoding="utf-8"))
    evidence, forced, multi = first["evidence"], first["per_query"], first["multi"]
    embedder = MiniLMEmbedder()
    runs: dict[str, dict[str, Any]] = {}
    for d in bench_sets(args.bench):
        began = time.perf_counter()
        held = held_settings(fits[d.name])
        with (
            opened_set(d, args.cache, args.limit, embedder) as (cat, scored),
            confidence_model(fits[d.name]["confidence"]),
        ):
            runs[d.name] = {p: per_query(cat, scored, held.but(ranker_order=p)) for p in PAIRS}
        print(f"{d.name}: {time.perf_counter() - began:.0f}s", flush=True)

    def picks(name: str, margin: float) -> str:
        single, several = (choose(evidence[name], s, margin) for s in SHAPES)
        return single if single == several else f"{single}/{several}"

    def recalls(name: str, pair: str) -> list[float]:
        if "/" not in pair:
            return list(forced[name][f"order {pair}"])
        if pair in runs[name]:
            return list(runs[name][pair]["recall"])
        a, b = pair.split("/")
        x, y = forced[name][f"order {a}"], forced[name][f"order {b}"]
        return [v if m else u for u, v, m in zip(x, y, multi[name], strict=True)]

    def gap(name: str, margin: float) -> float:
        best = max(mean(forced[name][p]) for p in PARTS)
        return mean(recalls(name, picks(name, margin))) - best

    chosen: dict[str, float] = {}
    for name in [*runs, None]:
        others = [n for n in runs if n != name]

        def score(m: float, others: Sequence[str] = others) -> tuple[float, float, float]:
            gaps = [gap(n, m) for n in others]
            return round(min(gaps, default=0.0), 6), round(mean(gaps), 6), m

        chosen[name or "all"] = max(MARGINS, key=score)
    table: dict[str, Any] = {}
    for n in runs:
        pair = picks(n, chosen[n])
        row: dict[str, Any] = {
            p: [round(mean(r["recall"]), 4), round(mean(r["complete"]), 4)]
            for p, r in runs[n].items()
        }
        row.update(margin=chosen[n], orders=pair)
        row["chosen held-out recall"] = round(mean(recalls(n, pair)), 4)
        row["grid"] = {f"{m:g}": [round(gap(n, m), 4), picks(n, m)] for m in MARGINS}
        table[n] = row
        print(f"## {n}: {row}", flush=True)
    args.json.write_text(json.dumps({
        "command": command_line("benchmarks/orders_gate.py", args_list),
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "margins": chosen, "sets": table,
        "per_query": {n: {p: r["recall"] for p, r in runs[n].items()} for n in runs},
    }, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
