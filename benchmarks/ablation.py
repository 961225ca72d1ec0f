"""The held-out default with one of its steps switched off at a time: where a set loses.

Each set runs the product default with the constants ``benchmarks/quality.py`` fitted
without it (read from its results, ``--fits``), then the same with one step off
(exact hits, reformulation, the dedupe, prerequisites, learned aliases, reading in
parts, the lexical lead), with the learned ranker replaced by the fixed fusion while
every other step stays on, and the parts (``bm25``, ``dense``, ``hybrid-fixed``), all
on the same seeded queries through ``harness.run`` (the product's own path). Nothing is
fitted here.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/ablation.py --limit 100 --cache DIR
[--sets toolbench,metatool]``; writes ``benchmarks/results/ablation.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality import DEFAULT_BENCH, bench_sets, command_line, held_settings  # noqa: E402

#: one step off at a time (SearchSettings fields)
STEPS_OFF: dict[str, dict[str, Any]] = {
    "no exact hits": {"exact_hits": False},
    "no reformulation": {"reformulate": False},
    "no dedupe": {"dedupe": False},
    "no prerequisites": {"prerequisites": False},
    "no learned aliases": {"learned_aliases": False},
    "no parts": {"parts": False},
    "fixed fusion, other steps on": {"fusion": "weighted", "adaptive_fusion": False},
}


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument(
        "--cache", type=Path, required=True, help="the indexed sets (quality.py --cache)"
    )
    parser.add_argument("--fits", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument("--sets", default="", help="comma-separated set names (default: all)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/ablation.json")
    args = parser.parse_args(args_list)

    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.harness import run

    fits = json.loads(args.fits.read_text(encoding="utf-8"))["fits"]
    wanted = {s for s in args.sets.split(",") if s}
    embedder = MiniLMEmbedder()
    out: dict[str, Any] = {}
    for d in bench_sets(args.bench):
        if wanted and d.name not in wanted:
            continue
        held = held_settings(fits[d.name])
        extra = {"default held-out": held}
        extra.update({name: held.but(**change) for name, change in STEPS_OFF.items()})
        report = run(
            d / "tools.jsonl", d / "queries.jsonl",
            strategies=("bm25", "dense", "hybrid-fixed"), extra=extra, limit=args.limit,
            embedder=embedder, db=args.cache / f"{d.name}.db",
        )  # fmt: skip
        out[d.name] = {
            k: [round(float(v["recall@5"]), 4), round(float(v["complete@5"]), 4)]
            for k, v in report["strategies"].items()
        }
        print(f"## {d.name}", flush=True)
        for k, (r, c) in out[d.name].items():
            print(f"| {k} | {r:.3f} / {c:.3f} |", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "command": command_line("benchmarks/ablation.py", args_list), "sets": out,
    }, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
