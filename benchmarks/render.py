"""Rendering and counting a shortlist: the cached path against rendering and encoding anew.

    python benchmarks/render.py [--shortlists 300] [--k 3] [--rounds 7]

Over the bundled demo catalog (205 tools), for each format: the time to render a
shortlist of ``--k`` tools and count its o200k tokens, as discovery's inject stage does
(``inject.render`` then ``count_json``), against the same work without the caches
(each tool rendered by its renderer, the whole list serialised and encoded). Both run
interleaved, round by round, over the same shortlists after one warm round; the figure
is the best round's mean (the machine may be shared: its load average is recorded).
Both paths' results are compared: any difference in the rendered bytes or the count
fails the run. Writes ``benchmarks/results/render.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shortlists", type=int, default=300)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    from toolscout.discovery import inject
    from toolscout.discovery.tokencount import count_json, count_text, dumps, encoding
    from toolscout.loader import demo_catalog_dir, read_catalog

    specs = read_catalog([demo_catalog_dir()])
    names = inject.name_table([s.card for s in specs])
    encoding()
    lists = [[specs[(i * 7 + j * 13) % len(specs)] for j in range(args.k)]
             for i in range(args.shortlists)]  # fmt: skip

    def uncached(chosen: list[Any], fmt: str) -> tuple[str, int]:
        rendered = [inject._RENDERERS[fmt](s, names[s.id]) for s in chosen]
        text = dumps(rendered)
        return text, count_text(text)

    def cached(chosen: list[Any], fmt: str) -> tuple[str, int]:
        rendered = inject.render(chosen, fmt, names)
        return dumps(rendered), count_json(rendered)

    rows: list[dict[str, Any]] = []
    load_before = round(os.getloadavg()[0], 2)
    for fmt in inject.FORMATS:
        best = {"uncached": float("inf"), "cached": float("inf")}
        for r in range(args.rounds + 1):
            for name, fn in (("uncached", uncached), ("cached", cached)):
                start = time.perf_counter()
                out = [fn(chosen, fmt) for chosen in lists]
                mean_us = (time.perf_counter() - start) / len(lists) * 1e6
                if r:
                    best[name] = min(best[name], mean_us)
                if name == "uncached":
                    reference = out
                elif out != reference:
                    raise SystemExit(f"{fmt}: the cached rendering or count differs")
        rows.append({"format": fmt, "uncached_us": round(best["uncached"], 1),
                     "cached_us": round(best["cached"], 1),
                     "speedup": round(best["uncached"] / best["cached"], 1)})  # fmt: skip
    result = {"k": args.k, "shortlists": args.shortlists, "rounds": args.rounds,
              "load_avg_before": load_before, "load_avg_after": round(os.getloadavg()[0], 2),
              "rows": rows}  # fmt: skip
    print(f"{'format':<18} {'uncached µs':>12} {'cached µs':>10} {'speedup':>8}")
    for row in rows:
        print(f"{row['format']:<18} {row['uncached_us']:>12} {row['cached_us']:>10}"
              f" {row['speedup']:>7}x")  # fmt: skip
    print(f"load average {result['load_avg_before']} -> {result['load_avg_after']}")
    path = ROOT / "benchmarks" / "results" / "render.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
