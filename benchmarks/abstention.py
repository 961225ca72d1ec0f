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
GRID_UNMATCHED = tuple(round(i * 0.01, 2) for i in range(0, 101))  # 0 .. 1
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
        out.append({"id": q.id, "confidence": s.confidence, "recall": recall, "named": named,
                    **signals(catalog, q.query, s)})  # fmt: skip
    return out


def signals(catalog: Any, query: str, shortlist: Any) -> dict[str, Any]:
    """Candidate no-tool-fits signals beside the confidence, for analysis: the share of
    the query's content terms found in the first tool's card and in any of the first K
    cards, and the first tool's cosine."""
    from toolscout.discovery import abstain
    from toolscout.discovery.lexical import terms

    wanted = set(terms(query))
    seen: list[set[str]] = []
    for t in shortlist.tools[:K]:
        card = catalog.card(t.id)
        text = (
            " ".join([card.id, card.name, card.summary, *card.tags, *card.aliases]) if card else ""
        )
        seen.append(set(terms(text)))
    n = len(wanted) or 1
    return {
        "n_terms": len(wanted),
        "cover1": len(wanted & seen[0]) / n if seen else 0.0,
        "cover5": len(wanted & set().union(*seen)) / n if seen else 0.0,
        "dense1": shortlist.tools[0].dense if shortlist.tools else 0.0,
        "lex5": max((t.lexical for t in shortlist.tools[:K]), default=0.0),
        "unmatched": unmatched(
            catalog,
            query,
            shortlist,
            any_language=abstain.reads_any_language(catalog.embedder.model_id),
        ),
    }


def unmatched(catalog: Any, query: str, shortlist: Any, *, any_language: bool) -> bool:
    """discovery.abstain.unmatched over the request's content terms, as discovery calls it."""
    from toolscout.discovery import abstain
    from toolscout.discovery.lexical import terms

    shown = [t.id for t in shortlist.tools[:K]]
    also = abstain.card_terms(c for c in map(catalog.card, shown) if c is not None)
    fields = catalog.phrases().fields
    return abstain.unmatched(terms(query), shown, fields, any_language=any_language, also=also)


def abstains(r: Mapping[str, Any], t: float, u: float = 0.0) -> bool:
    """Whether a request abstains at confidence threshold ``t`` and, for a shortlist none
    of whose tools shares a word with it, ``u`` (discovery.abstain.UNMATCHED_BELOW)."""
    low = bool(r["confidence"] < t or (r.get("unmatched") and r["confidence"] < u))
    return not r["named"] and low


def loss(rs: Sequence[Mapping[str, Any]], t: float, u: float = 0.0) -> float:
    return float(sum(r["recall"] for r in rs if abstains(r, t, u))) / max(len(rs), 1)


def rate(rs: Sequence[Mapping[str, Any]], t: float, u: float = 0.0) -> float:
    return sum(abstains(r, t, u) for r in rs) / max(len(rs), 1)


def largest_within(
    sets: Mapping[str, Sequence[Mapping[str, Any]]], budget: float, t: float | None = None
) -> float:
    """The largest grid threshold whose loss is within ``budget`` on every set given: the
    confidence threshold, or (given that one as ``t``) the unmatched one, at least ``t``."""
    best = 0.0 if t is None else t
    for g in GRID if t is None else GRID_UNMATCHED:
        if t is not None and g < t:
            continue
        ok = all((loss(rs, g) if t is None else loss(rs, t, g)) <= budget for rs in sets.values())
        if not ok:
            break
        best = g
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
    parser.add_argument("--rows", type=Path, default=None, help="write every request's row")
    parser.add_argument(
        "--from-rows", type=Path, nargs="+", default=None,
        help="fit and report from --rows files of earlier runs (one set each), running nothing",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.from_rows:
        answerable: dict[str, list[dict[str, Any]]] = {}
        unserved: dict[str, list[dict[str, Any]]] = {}
        for path in args.from_rows:
            saved = json.loads(path.read_text(encoding="utf-8"))
            answerable.update(saved["answerable"])
            unserved.update(saved["unanswerable"])
        return report(answerable, unserved, args, argv)
    fits = json.loads(args.fits.read_text(encoding="utf-8"))["fits"]
    wanted = {s for s in args.sets.split(",") if s}
    sets = [d for d in quality.bench_sets(args.bench) if not wanted or d.name in wanted]

    from toolscout.discovery import calibrate
    from toolscout.discovery.catalog import Catalog
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.loader import demo_catalog_dir, read_catalog
    from toolscout.settings import SearchSettings

    embedder = MiniLMEmbedder()
    answerable = {}
    unserved = {}
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

    if args.rows is not None:  # every request's signals, for studying other rules
        args.rows.write_text(json.dumps({"answerable": answerable, "unanswerable": unserved}))
    return report(answerable, unserved, args, argv)


def report(
    answerable: Mapping[str, Sequence[Mapping[str, Any]]],
    unserved: Mapping[str, Sequence[Mapping[str, Any]]],
    args: argparse.Namespace,
    argv: Sequence[str] | None,
) -> int:
    """Fit both thresholds leave-one-set-out, print the table, write the JSON."""
    folds: dict[str, dict[str, Any]] = {}
    for name, rs in answerable.items():
        others = {n: r for n, r in answerable.items() if n != name}
        t = largest_within(others, args.budget) if others else 0.0
        um = largest_within(others, args.budget, t) if others else t
        folds[name] = {
            "threshold": t,
            "unmatched_below": um,
            "held_out_loss": round(loss(rs, t, um), 4),
            "held_out_abstain_rate": round(rate(rs, t, um), 4),
            **{f"abstain_{u}": round(rate(ur, t, um), 4) for u, ur in unserved.items()},
            **{f"abstain_{u}_confidence_only": round(rate(ur, t), 4) for u, ur in unserved.items()},
        }
    shipped = min(f["threshold"] for f in folds.values()) if folds else 0.0
    shipped_um = min(f["unmatched_below"] for f in folds.values()) if folds else 0.0
    at_shipped: dict[str, Any] = {
        "threshold": shipped,
        "unmatched_below": shipped_um,
        "loss": {n: round(loss(rs, shipped, shipped_um), 4) for n, rs in answerable.items()},
        "abstain": {u: round(rate(ur, shipped, shipped_um), 4) for u, ur in unserved.items()},
        "loss_confidence_only": {n: round(loss(rs, shipped), 4) for n, rs in answerable.items()},
        "abstain_confidence_only": {u: round(rate(ur, shipped), 4) for u, ur in unserved.items()},
    }
    command = quality.command_line(
        "benchmarks/abstention.py", sys.argv[1:] if argv is None else argv
    )
    unserved_names = sorted(unserved)
    head = (
        "| held-out set | threshold (fitted on the others) | unmatched below | recall@5 lost "
        "| abstained |"
    )
    lines = [
        head
        + "".join(f" abstained on unanswerable {u} (confidence only) |" for u in unserved_names),
        "|---|---|---|---|---|" + "---|" * len(unserved_names),
    ]
    for name, f in folds.items():
        cells = "".join(
            f" {f[f'abstain_{u}']:.2f} ({f[f'abstain_{u}_confidence_only']:.2f}) |"
            for u in unserved_names
        )
        lines.append(
            f"| {name} | {f['threshold']:.3f} | {f['unmatched_below']:.2f} | "
            f"{f['held_out_loss']:.4f} | {f['held_out_abstain_rate']:.3f} |{cells}"
        )
    lines.append("")
    lines.append(
        f"Recommended `abstain_below` = {shipped:.3f}, `UNMATCHED_BELOW` = {shipped_um:.2f} "
        "(the smallest fold thresholds): recall@5 lost "
        + ", ".join(f"{n} {v:.4f}" for n, v in at_shipped["loss"].items())
        + "; abstained on unanswerable requests: "
        + ", ".join(f"{u} {v:.2f} ({len(unserved[u])})" for u, v in at_shipped["abstain"].items())
    )
    from toolscout.discovery import abstain

    ship_t, ship_u = abstain.RECOMMENDED, abstain.UNMATCHED_BELOW
    at_code = {
        "threshold": ship_t,
        "unmatched_below": ship_u,
        "loss": {n: round(loss(rs, ship_t, ship_u), 4) for n, rs in answerable.items()},
        "abstain": {u: round(rate(ur, ship_t, ship_u), 4) for u, ur in unserved.items()},
        "abstain_confidence_only": {u: round(rate(ur, ship_t), 4) for u, ur in unserved.items()},
    }
    lines.append(
        f"At the shipped constants (RECOMMENDED {ship_t}, UNMATCHED_BELOW {ship_u}): recall@5 "
        "lost "
        + ", ".join(f"{n} {v:.4f}" for n, v in at_code["loss"].items())
        + "; abstained on unanswerable requests: "
        + ", ".join(
            f"{u} {v:.2f} (confidence alone {at_code['abstain_confidence_only'][u]:.2f})"
            for u, v in at_code["abstain"].items()
        )
    )
    table = "\n".join(lines)
    print(f"Reproduce with `{command}`\n\n{table}")
    quality.write_results(
        args.json,
        command,
        budget=args.budget,
        folds=folds,
        shipped=at_shipped,
        at_code=at_code,
        confidences={u: [round(r["confidence"], 4) for r in ur] for u, ur in unserved.items()},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
