"""FastMCP search transforms on bfcl: FastMCP's own BM25 against toolscout's, same run.

    PYTHONPATH=src .venv/bin/python benchmarks/fastmcp_search.py [--set bfcl] [--limit N]

The set's tools become FastMCP ``Tool`` objects (name = tool id, description, parameter
schema). Each transform's search (``_search(tools, query)``, what its ``search_tools``
runs after the server's own filtering) answers every query with at most 5 tools:
``BM25SearchTransform`` from ``fastmcp`` and ``ToolscoutSearchTransform`` over a catalog
holding the same tools, ranked with the constants fitted without this set
(``benchmarks/results/quality.json``), every tool entitled, abstention at its default.
Recall@5 and per-query latency (p50 / p95, after one warm-up query) are measured in the
same process, one transform after the other.

Prints a table and writes ``benchmarks/results/fastmcp_search.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality

ROOT = Path(__file__).resolve().parents[1]
K = 5


async def measure(transform: Any, tools: Sequence[Any], queries: Sequence[Any]) -> dict[str, Any]:
    await transform._search(tools, queries[0].query)  # warm-up: builds any index
    recalls, latencies = [], []
    for q in queries:
        start = time.perf_counter()
        found = await transform._search(tools, q.query)
        latencies.append((time.perf_counter() - start) * 1000)
        top = {t.name for t in found[:K]}
        recalls.append(sum(g in top for g in q.gold) / len(q.gold))
    latencies.sort()
    return {
        "recall@5": round(statistics.fmean(recalls), 4),
        "p50_ms": round(latencies[len(latencies) // 2], 2),
        "p95_ms": round(latencies[int(len(latencies) * 0.95) - 1], 2),
        "queries": len(queries),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--set", default="bfcl")
    parser.add_argument("--limit", type=int, default=None, help="N queries (seeded)")
    parser.add_argument("--cache", type=Path, default=None, help="indexed sets (quality.py's)")
    parser.add_argument("--fits", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument(
        "--json", type=Path, default=ROOT / "benchmarks/results/fastmcp_search.json"
    )
    args = parser.parse_args(argv)
    fit = json.loads(args.fits.read_text(encoding="utf-8"))["fits"].get(args.set)

    from fastmcp.server.transforms.search.bm25 import BM25SearchTransform
    from fastmcp.tools.base import Tool

    from toolscout.adapters.fastmcp import ToolscoutSearchTransform
    from toolscout.discovery import calibrate
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.harness import eval_principal
    from toolscout.service import Toolscout
    from toolscout.settings import SearchSettings

    d = args.bench / args.set
    with tempfile.TemporaryDirectory(prefix="toolscout-fastmcp-") as tmp:
        workdir = args.cache or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        index = not (workdir / f"{d.name}.db").is_file()
        with (
            quality.opened_set(d, workdir, args.limit, MiniLMEmbedder(), index=index) as (cat, qs),
            quality.confidence_model(fit["confidence"] if fit else calibrate.CONFIDENCE),
        ):
            cat.settings = quality.held_settings(fit) if fit else SearchSettings()
            tools = [
                Tool(name=s.id, description=s.card.summary, parameters=s.parameters or {})
                for s in cat.specs()
            ]
            ts = Toolscout(cat)
            ours = ToolscoutSearchTransform(ts, eval_principal(cat), max_results=K, index=False)
            results = {
                "fastmcp BM25SearchTransform": asyncio.run(
                    measure(BM25SearchTransform(max_results=K), tools, qs)
                ),
                "toolscout ToolscoutSearchTransform": asyncio.run(measure(ours, tools, qs)),
            }
    command = quality.command_line(
        "benchmarks/fastmcp_search.py", sys.argv[1:] if argv is None else argv
    )
    lines = [
        f"| transform ({args.set}, {len(tools)} tools) | recall@5 | p50 ms | p95 ms | queries |",
        "|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['recall@5']:.3f} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | "
            f"{r['queries']} |"
        )
    print(f"Reproduce with `{command}`\n\n" + "\n".join(lines))
    quality.write_results(args.json, command, set=args.set, tools=len(tools), results=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
