"""The order chosen per catalog from its own pseudo-queries (discovery/orders.py), held out.

Each set is indexed (its calibration measures every order of ``orders.ORDERS`` on its own
single- and multi-tool pseudo-queries; no real request is seen) and its seeded queries run
through the held-out default (the constants ``benchmarks/quality.py`` fitted without the
set, read from ``--fits``) with each order forced in turn, beside its parts (``bm25``,
``dense``, ``hybrid-fixed``) and the default as it ships. A request read in several parts
(``parts.request_parts``) takes the multi-tool order, any other the single-tool one, so a
margin ``m`` gives each set the recall of the orders ``orders.choose`` picks from its
evidence at ``m`` (per query: the forced run of the order its shape takes; a part of a
request is ranked as the whole is in that run, the one approximation, checked by the last
run). The margin is chosen leave-one-set-out on :data:`MARGINS`: for each set, the one with
the largest worst margin over the best part on the *other* sets (then the largest mean,
then the larger margin: the ranker's order on a tie). Finally each set runs the held-out
default with the order choice on at its held-out margin: the figures reported.

Run: ``PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/orders.py --limit 200
--cache DIR``; writes ``benchmarks/results/orders.json``.
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

#: the margins the choice is fitted on (1: never leaves the ranker's order)
MARGINS: tuple[float, ...] = (0.0, 0.02, 0.05, 0.1, 0.2, 1.0)
PARTS = ("bm25", "dense", "hybrid-fixed")


def per_query(catalog: Any, queries: Sequence[Any], settings: Any) -> dict[str, list[float]]:
    """recall@5, complete@5, confidence and whether the first tool was right, per query."""
    from toolscout.evaluate.harness import discover_once, eval_principal
    from toolscout.evaluate.metrics import complete_at, recall_at

    principal = eval_principal(catalog)
    out: dict[str, list[float]] = {"recall": [], "complete": [], "conf": [], "right": []}
    for q in queries:
        got = discover_once(catalog, settings, q.query, principal)
        out["recall"].append(recall_at(got.ranked, q.gold, 5))
        out["complete"].append(complete_at(got.ranked, q.gold, 5))
        out["conf"].append(float(got.confidence or 0.0))
        out["right"].append(float(bool(got.ranked) and got.ranked[0] in q.gold))
    return out


def mean(v: Sequence[float]) -> float:
    return sum(v) / len(v) if v else 0.0


def combined(
    runs: Mapping[str, Any], multi: Sequence[bool], pick: tuple[str, str], key: str
) -> float:
    """The set's mean ``key`` when one-part requests take ``pick[0]``'s run, the others
    ``pick[1]``'s."""
    a, b = runs[f"order {pick[0]}"][key], runs[f"order {pick[1]}"][key]
    return mean([y if m else x for x, y, m in zip(a, b, multi, strict=True)])


def ece(run: Mapping[str, list[float]]) -> float:
    from toolscout.evaluate.metrics import reliability

    return float(
        reliability(list(zip(run["conf"], [r > 0 for r in run["right"]], strict=True)))["ece"]
    )


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--cache", type=Path, required=True, help="the indexed sets")
    parser.add_argument("--fits", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument("--sets", default="", help="comma-separated set names (default: all)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/orders.json")
    args = parser.parse_args(args_list)

    from toolscout.discovery.calibrate import Calibration
    from toolscout.discovery.orders import ORDERS, SHAPES, choose
    from toolscout.discovery.parts import request_parts
    from toolscout.discovery.search import CALIBRATION_META
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.harness import STRATEGIES
    from toolscout.settings import SearchSettings

    fits = json.loads(args.fits.read_text(encoding="utf-8"))["fits"]
    wanted = {s for s in args.sets.split(",") if s}
    sets = [d for d in bench_sets(args.bench) if not wanted or d.name in wanted]
    embedder = MiniLMEmbedder()
    evidence: dict[str, Any] = {}
    runs: dict[str, dict[str, Any]] = {}
    multi: dict[str, list[bool]] = {}
    for d in sets:
        began = time.perf_counter()
        held = held_settings(fits[d.name])
        # the choice on (a margin no order passes): the calibration measures the orders
        measuring = SearchSettings(order_margin=1.0)
        with opened_set(d, args.cache, args.limit, embedder, index=True, settings=measuring) as (
            cat,
            scored,
        ):
            cal = Calibration.from_json(cat.store.meta(CALIBRATION_META) or "")
            if cal is None or not cal.orders:  # fitted before, without the choice
                cal = cat.calibrate()
            evidence[d.name] = cal.orders if cal is not None else {}
            multi[d.name] = [bool(held.parts and request_parts(q.query)) for q in scored]
            todo: dict[str, Any] = {p: STRATEGIES[p] for p in PARTS}
            todo["default held-out"] = held
            todo.update({f"order {o}": held.but(ranker_order=o) for o in ORDERS})
            # BM25 orders a request in parts unless its sure parts agree on one tool
            todo["order ranker/bm25"] = held.but(ranker_order="ranker/bm25")
            with confidence_model(fits[d.name]["confidence"]):
                runs[d.name] = {k: per_query(cat, scored, s) for k, s in todo.items()}
        took = time.perf_counter() - began
        print(f"{d.name}: {len(scored)} queries, {sum(multi[d.name])} in parts, "
              f"evidence {evidence[d.name]} ({took:.0f}s)", flush=True)  # fmt: skip

    def picks(name: str, margin: float) -> tuple[str, str]:
        single, several = (choose(evidence[name], s, margin) for s in SHAPES)
        return single, several

    def best_part(name: str, key: str) -> float:
        return max(mean(runs[name][p][key]) for p in PARTS)

    def at(name: str, margin: float, key: str = "recall") -> float:
        return combined(runs[name], multi[name], picks(name, margin), key)

    grid = {
        n: {
            f"{m:g}": [round(at(n, m) - best_part(n, "recall"), 4), "/".join(picks(n, m))]
            for m in MARGINS
        }
        for n in runs
    }
    chosen: dict[str, float] = {}
    for name in [*runs, None]:
        others = [n for n in runs if n != name]

        def score(m: float, others: Sequence[str] = others) -> tuple[float, float, float]:
            gaps = [at(n, m) - best_part(n, "recall") for n in others]
            return round(min(gaps, default=0.0), 6), round(mean(gaps), 6), m

        chosen[name or "all"] = max(MARGINS, key=score)
    # the figures: the held-out default with the choice on at its held-out margin
    final: dict[str, Any] = {}
    for d in sets:
        held = held_settings(fits[d.name])
        with (
            opened_set(d, args.cache, args.limit, embedder) as (cat, scored),
            confidence_model(fits[d.name]["confidence"]),
        ):
            got = per_query(cat, scored, held.but(order_margin=chosen[d.name]))
        final[d.name] = got
    table: dict[str, Any] = {}
    for n in runs:
        row: dict[str, Any] = {
            k: [round(mean(r["recall"]), 4), round(mean(r["complete"]), 4)]
            for k, r in runs[n].items()
        }
        row["chosen held-out"] = [
            round(mean(final[n]["recall"]), 4),
            round(mean(final[n]["complete"]), 4),
        ]
        row["margin"] = chosen[n]
        row["orders"] = "/".join(picks(n, chosen[n]))
        row["ece default"] = ece(runs[n]["default held-out"])
        row["ece chosen"] = ece(final[n])
        row["in parts"] = sum(multi[n])
        table[n] = row
        print(f"## {n} (margin {chosen[n]:g}: {row['orders']})", flush=True)
        for k, v in row.items():
            print(f"| {k} | {v} |", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "command": command_line("benchmarks/orders.py", args_list),
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "margins": chosen, "evidence": evidence, "grid": grid, "sets": table,
        "per_query": {
            n: {k: r["recall"] for k, r in runs[n].items()} | {"chosen": final[n]["recall"]}
            for n in runs
        },
        "multi": multi,
    }, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
