"""Abstention: how often discovery says "no tool fits" on requests no tool serves, and
what it costs on requests a tool does serve.

    PYTHONPATH=src .venv/bin/python benchmarks/abstention.py [--sets bfcl,metatool] [--limit N]

Unanswerable requests were written for this repository (``benchmarks/data/
unanswerable_demo.jsonl`` against the bundled demo catalog, ``unanswerable_bfcl.jsonl``
against bfcl; each checked by hand against the catalog's tool names and descriptions).
Answerable requests are the dev sets' own queries.

Each set is ranked with the constants fitted *without* it (``benchmarks/results/
quality.json``'s fits, as ``quality.py`` wrote them); the demo catalog, which no fit saw,
with the shipped ones, as is a set no fit left out. Every request runs once with
abstention off (k=5, progressive tier, every tool entitled), keeping its confidence,
recall@5 and whether it named a tool (a request that names one never abstains). A
threshold t then abstains on every request with confidence < t; its cost on a set is
the recall@5 those requests had.

The threshold is chosen leave-one-set-out: for each answerable set, the largest t on
the grid whose loss stays within ``--budget`` on every *other* set; the table shows the
loss on the held-out set at that t, and the abstention rates on the unanswerable
requests at it. ``discovery.abstain.RECOMMENDED`` is the smallest of those t.

Prints a table and writes ``benchmarks/results/abstention.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
K = 5
GRID = tuple(round(i * 0.005, 3) for i in range(0, 81))  # 0 .. 0.40
BUDGET = 0.01


def rows(catalog: Any, queries: Sequence[Any], settings: Any) -> list[dict[str, Any]]:
    """One discovery per request, abstention off: confidence, recall@K, named."""
    from toolscout.evaluate.harness import eval_principal

    principal = eval_principal(catalog)
    cfg = settings.but(abstain_below=0.0)
    out = []
    for q in queries:
        s = catalog.discover(q.query, principal, k=K, settings=cfg, tier="progressive")
        top = set(s.ids[:K])
        gold = list(q.gold)
        recall = sum(g in top for g in gold) / len(gold) if gold else 0.0
        named = any(t.exact for t in s.tools)
        out.append({"id": q.id, "confidence": s.confidence, "recall": recall, "named": named})
    return out


def abstains(r: Mapping[str, Any], t: float) -> bool:
    return not r["named"] and r["confidence"] < t


def loss(rs: Sequence[Mapping[str, Any]], t: float) -> float:
    return sum(r["recall"] for r in rs if abstains(r, t)) / max(len(rs), 1)


def rate(rs: Sequence[Mapping[str, Any]], t: float) -> float:
    return sum(abstains(r, t) for r in rs) / max(len(rs), 1)


def largest_within(sets: Mapping[str, Sequence[Mapping[str, Any]]], budget: float) -> float:
    """The largest grid threshold whose loss is within ``budget`` on every set given."""
    best = 0.0
    for t in GRID:
        if all(loss(rs, t) <= budget for rs in sets.values()):
            best = t
        else:
            break
    return best


def unanswerable(name: str) -> list[Any]:
    from toolscout.evaluate.evalset import EvalQuery

    out = []
    for line in (DATA / f"unanswerable_{name}.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        out.append(EvalQuery(rec["id"], rec["query"], (), rec["source"]))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--sets", default="", help="comma-separated dev sets (default: all)")
    parser.add_argument("--limit", type=int, default=None, help="N answerable queries per set")
    parser.add_argument("--budget", type=float, default=BUDGET, help="recall@5 loss allowed")
    parser.add_argument("--cache", type=Path, default=None, help="indexed sets (quality.py's)")
    parser.add_argument("--fits", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/abstention.json")
    args = parser.parse_args(argv)
    fits = json.loads(args.fits.read_text(encoding="utf-8"))["fits"]
    wanted = {s for s in args.sets.split(",") if s}
    sets = [d for d in quality.bench_sets(args.bench) if not wanted or d.name in wanted]

    from toolscout.discovery import calibrate
    from toolscout.discovery.catalog import Catalog
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.loader import demo_catalog_dir, read_catalog
    from toolscout.settings import SearchSettings

    embedder = MiniLMEmbedder()
    answerable: dict[str, list[dict[str, Any]]] = {}
    unserved: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="toolscout-abstention-") as tmp:
        workdir = args.cache or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for d in sets:
            start = time.perf_counter()
            fit = fits.get(d.name)  # a set no fit saw: the shipped constants never saw it
            index = not (workdir / f"{d.name}.db").is_file()
            with (
                quality.opened_set(d, workdir, args.limit, embedder, index=index) as (cat, qs),
                quality.confidence_model(fit["confidence"] if fit else calibrate.CONFIDENCE),
            ):
                held = quality.held_settings(fit) if fit else SearchSettings()
                answerable[d.name] = rows(cat, qs, held)
                if (DATA / f"unanswerable_{d.name}.jsonl").is_file():
                    unserved[d.name] = rows(cat, unanswerable(d.name), held)
            print(f"{d.name}: {time.perf_counter() - start:.0f}s", file=sys.stderr, flush=True)
        with Catalog.open(workdir / "demo.db", embedder=embedder, log=False) as cat:
            cat.add(read_catalog([demo_catalog_dir()]))
            unserved["demo"] = rows(cat, unanswerable("demo"), SearchSettings())

    folds: dict[str, dict[str, Any]] = {}
    for name, rs in answerable.items():
        others = {n: r for n, r in answerable.items() if n != name}
        t = largest_within(others, args.budget) if others else 0.0
        folds[name] = {
            "threshold": t,
            "held_out_loss": round(loss(rs, t), 4),
            "held_out_abstain_rate": round(rate(rs, t), 4),
            **{f"abstain_{u}": round(rate(ur, t), 4) for u, ur in unserved.items()},
        }
    shipped = min(f["threshold"] for f in folds.values()) if folds else 0.0
    at_shipped = {
        "threshold": shipped,
        "loss": {n: round(loss(rs, shipped), 4) for n, rs in answerable.items()},
        "abstain": {u: round(rate(ur, shipped), 4) for u, ur in unserved.items()},
    }
    command = quality.command_line(
        "benchmarks/abstention.py", sys.argv[1:] if argv is None else argv
    )
    unserved_names = sorted(unserved)
    head = "| held-out set | threshold (fitted on the others) | recall@5 lost | abstained |"
    lines = [
        head + "".join(f" abstained on unanswerable {u} |" for u in unserved_names),
        "|---|---|---|---|" + "---|" * len(unserved_names),
    ]
    for name, f in folds.items():
        cells = "".join(f" {f[f'abstain_{u}']:.2f} |" for u in unserved_names)
        lines.append(
            f"| {name} | {f['threshold']:.3f} | {f['held_out_loss']:.4f} | "
            f"{f['held_out_abstain_rate']:.3f} |{cells}"
        )
    lines.append("")
    lines.append(
        f"Recommended `abstain_below` = {shipped:.3f} (the smallest fold threshold): recall@5 lost "
        + ", ".join(f"{n} {v:.4f}" for n, v in at_shipped["loss"].items())
        + "; abstained on unanswerable requests: "
        + ", ".join(f"{u} {v:.2f} ({len(unserved[u])})" for u, v in at_shipped["abstain"].items())
    )
    table = "\n".join(lines)
    print(f"Reproduce with `{command}`\n\n{table}")
    quality.write_results(
        args.json,
        command,
        budget=args.budget,
        folds=folds,
        shipped=at_shipped,
        confidences={u: [round(r["confidence"], 4) for r in ur] for u, ur in unserved.items()},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
