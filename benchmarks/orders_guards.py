"""The two guards of the learned ranker's order, on the full dev sets, held out.

*The safety floor* (``SearchSettings.ranker_floor``): where the ranker's own probability
that its first tool is right is below the floor, its pool takes the fixed fusion's order
(the ranker is a learned re-ranking of the fused list; where it is unsure, the fixed
fusion's order is the safer one). *The coverage rule* (``ranker_cover``): the first hit
of the BM25 list and of the dense list (of each part's lists too, for a request read in
parts) keep a place in the top five (``orders.covered``).

Every query of every set (no ``--limit``: the full sets) goes through the product's own
path (``harness.discover_once``) once per variant, with the constants
``benchmarks/quality.py`` fitted without the set (``--fits``: ranker prior, Platt step,
blend, dedupe yield, lead margin and confidence model); queries run in the outer loop so
each is encoded once for every variant (the vector cache), which is why this is not
``harness.run`` (each strategy there pays for its own encodings: latency, not quality).
Per query it keeps recall@5, complete@5, the shortlist's confidence and whether its first
tool was right.

``--report`` (no catalog opened) then chooses the variant leave-one-set-out: for each set,
the variant with the largest *worst* recall@5 margin over the best part on the other five
sets, then the largest mean margin, then the default (the smaller change) on a tie; and
prints the held-out figures with 95% paired bootstrap intervals (``fitting.paired_interval``)
and the ECE of each set's held-out confidence.

Run: ``PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/orders_guards.py --cache DIR
[--sets toolbench,bfcl]`` (appends to ``--json``), then ``... --report``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality import (  # noqa: E402
    DEFAULT_BENCH,
    bench_sets,
    command_line,
    confidence_model,
    held_settings,
    opened_set,
)

PARTS: tuple[str, ...] = ("bm25", "dense", "hybrid-fixed")
#: the grid: (floor, cover); (0, 0) is the default; the coverage rule at floor 0 only (the
#: run's cost: each variant is a discovery of every query)
GRID: tuple[tuple[float, int], ...] = ((0.0, 0), (0.3, 0), (1.0, 0), (0.0, 5))
DEFAULT = "floor 0 / cover 0"


def variant(floor: float, cover: int) -> str:
    return f"floor {floor:g} / cover {cover}"


def run_set(
    d: Path, workdir: Path, fit: Mapping[str, Any], embedder: Any, limit: int | None = None
) -> dict[str, Any]:
    """Per-query rows of every part and every variant on one full set."""
    from toolscout.evaluate.harness import STRATEGIES, discover_and_score, eval_principal

    held = held_settings(fit)
    strategies: dict[str, Any] = {
        variant(f, c): held.but(ranker_floor=f, ranker_cover=c) for f, c in GRID
    }
    strategies.update({p: STRATEGIES[p] for p in PARTS})
    rows: dict[str, dict[str, list[float]]] = {
        name: {"recall": [], "complete": [], "confidence": [], "right": []} for name in strategies
    }
    spent: dict[str, float] = {}
    start = time.perf_counter()
    with (
        confidence_model(fit["confidence"]),
        opened_set(d, workdir, limit, embedder, index=True) as (cat, scored),
    ):
        principal = eval_principal(cat)
        for n, q in enumerate(scored):
            for name, settings in strategies.items():
                out = discover_and_score(cat, settings, q.query, q.gold, principal, rows[name])
                spent[name] = spent.get(name, 0.0) + out.ms
            if (n + 1) % 200 == 0:
                print(f"{d.name}: {n + 1}/{len(scored)} {time.perf_counter() - start:.0f}s",
                      flush=True)  # fmt: skip
    return {
        "queries": len(scored),
        "seconds": round(time.perf_counter() - start),
        "ms": {k: round(v) for k, v in spent.items()},
        "rows": rows,
    }


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / max(len(xs), 1)


def best_part(data: Mapping[str, Any], metric: str = "recall") -> tuple[str, float]:
    return max(((p, mean(data["rows"][p][metric])) for p in PARTS), key=lambda t: t[1])


def choose(sets: Mapping[str, Any], names: Sequence[str], variants: Sequence[str]) -> str:
    """The variant with the largest worst recall@5 margin over the best part on ``names``,
    then the largest mean; the default on a tie."""

    def key(v: str) -> tuple[float, float, int]:
        margins = [mean(sets[s]["rows"][v]["recall"]) - best_part(sets[s])[1] for s in names]
        return (round(min(margins), 6), round(mean(margins), 6), int(v == DEFAULT))

    return max(variants, key=key)


def ece(data: Mapping[str, Any], name: str) -> float:
    from toolscout.evaluate.metrics import reliability

    row = data["rows"][name]
    pairs = [(c, bool(r)) for c, r in zip(row["confidence"], row["right"], strict=True) if c >= 0]
    return float(reliability(pairs)["ece"]) if pairs else float("nan")


def report(sets: Mapping[str, Any]) -> list[str]:
    from toolscout.evaluate.fitting import paired_interval

    variants = [variant(f, c) for f, c in GRID]
    names = sorted(sets)
    out = [
        "| set | queries | bm25 | dense | hybrid-fixed | "
        + " | ".join(variants)
        + " | chosen without the set | chosen, held out | held out − best part, 95% CI"
        " | chosen − default, 95% CI | ECE default | ECE chosen |",
        "|" + "---|" * (len(variants) + 11),
    ]
    for s in names:
        data = sets[s]
        rows = data["rows"]

        def cell(name: str, rows: Mapping[str, Any] = rows) -> str:
            return f"{mean(rows[name]['recall']):.3f} / {mean(rows[name]['complete']):.3f}"

        others = [o for o in names if o != s]
        pick = choose(sets, others, variants) if others else DEFAULT
        part, _ = best_part(data)
        d_best = paired_interval(rows[pick]["recall"], rows[part]["recall"])
        d_def = paired_interval(rows[pick]["recall"], rows[DEFAULT]["recall"])
        out.append(
            f"| {s} | {data['queries']} | "
            + " | ".join(cell(p) for p in PARTS)
            + " | "
            + " | ".join(cell(v) for v in variants)
            + f" | {pick} | **{cell(pick)}** | {d_best[0]:+.3f} [{d_best[1]:+.3f}, "
            f"{d_best[2]:+.3f}] ({part}) | {d_def[0]:+.3f} [{d_def[1]:+.3f}, {d_def[2]:+.3f}]"
            f" | {ece(data, DEFAULT):.3f} | {ece(data, pick):.3f} |"
        )
    out.append("")
    out.append(f"chosen on all {len(names)} sets: {choose(sets, names, variants)}")
    return out


def headroom(orders_json: Path) -> list[str]:
    """What a per-request choice between the default and the fixed fusion's order could
    gain at best (an oracle taking the better of the two per query), from the per-query
    recall@5 of ``benchmarks/orders.py`` (200 seeded queries per set, held-out constants)."""
    per_query = json.loads(orders_json.read_text(encoding="utf-8"))["per_query"]
    out = [
        "| set | queries | default held-out | fixed order, other steps on | oracle of the two"
        " | queries where they differ | hybrid-fixed | queries where default ≠ hybrid-fixed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s, v in sorted(per_query.items()):
        a, f, h = v["default held-out"], v["order fixed"], v["hybrid-fixed"]
        oracle = [max(x, y) for x, y in zip(a, f, strict=True)]
        out.append(
            f"| {s} | {len(a)} | {mean(a):.3f} | {mean(f):.3f} | {mean(oracle):.3f} | "
            f"{sum(x != y for x, y in zip(a, f, strict=True))} | {mean(h):.3f} | "
            f"{sum(x != y for x, y in zip(a, h, strict=True))} |"
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, help="the indexed sets (quality.py --cache)")
    parser.add_argument("--fits", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument("--sets", default="", help="comma-separated set names (default: all)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/guards.json")
    parser.add_argument("--limit", type=int, default=None, help="a seeded sample (smoke)")
    parser.add_argument("--report", action="store_true", help="only the tables, from --json")
    parser.add_argument("--headroom", type=Path, help="orders.py's JSON: the oracle's table")
    args = parser.parse_args(args_list)

    doc: dict[str, Any] = {"commands": [], "sets": {}}
    if args.json.exists():
        doc = json.loads(args.json.read_text(encoding="utf-8"))
    if args.headroom is not None:
        print("\n".join(headroom(args.headroom)))
        return 0
    if args.report:
        print("\n".join(report(doc["sets"])))
        return 0
    if args.cache is None:
        parser.error("--cache is required to run the sets")

    from toolscout.embed.minilm import MiniLMEmbedder

    fits = json.loads(args.fits.read_text(encoding="utf-8"))["fits"]
    wanted = [s for s in args.sets.split(",") if s]
    embedder = MiniLMEmbedder()
    sets = {d.name: d for d in bench_sets(args.bench)}
    for name in wanted or list(sets):
        doc["sets"][name] = run_set(sets[name], args.cache, fits[name], embedder, args.limit)
        doc["commands"].append(command_line("benchmarks/orders_guards.py", args_list))
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc) + "\n", encoding="utf-8")
        print(f"## {name}: {doc['sets'][name]['seconds']}s", flush=True)
    print("\n".join(report(doc["sets"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
