"""A per-query lexical lean, held out: BM25 added to the ranker's order on the requests
whose own evidence says so, not on a whole catalog.

The lexical lead (``calibrate.LEAD``, ``LEAD_MARGIN``) is a catalog-level switch, and on
the six dev sets it never leads. This measures whether the *request* tells when BM25
should lead: every query of every set goes once through the product's own BM25 and dense
retrieval (``ranker_features.pools``, cached), each set's pools are ordered by the learned
ranker with the prior and blend ``quality.py`` fitted without the set (``--fits``), and a
*lean* adds ``lead`` × BM25 (relative to the query's best) to that order where one
feature of the request is on one side of a threshold:

- ``terms``: distinct content terms (saturating at ``calibrate.LONG_TERMS``);
- ``agree``: the overlap of the BM25 and dense lists' first ``calibrate.AGREE_AT``;
- ``rare``: the most distinct rare query terms one candidate's name or summary holds
  (``calibrate.RARE_CAP`` at most);
- ``parts``: the parts ``discovery/parts.py`` reads the request in.

The lean is chosen leave-one-set-out: for each set, among "never" and every feature ×
threshold × side × lead, the one with the largest worst margin over the best of the pool's
parts (BM25, dense, the fixed fusion; the smaller of the recall@5 and complete@5 margins) on
the other five sets, then the largest mean, "never" on a tie; it is scored on the set held
out. Only the order of the pool is measured (no exact hits, parts, dedupe or
prerequisites): a lean that won here would still need the full default's run.

Run: ``PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/orders_lean.py --cache DIR
--fits benchmarks/results/quality.json``; writes ``benchmarks/results/orders_lean.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality import DEFAULT_BENCH, command_line  # noqa: E402
from ranker_features import fixed_order, pools_by_set  # noqa: E402

#: the leads tried (calibrate.LEAD is 4)
LEADS = (2.0, 4.0, 8.0)
#: thresholds per feature (a lean on "feature >= t" or "feature < t")
THRESHOLDS: dict[str, tuple[float, ...]] = {
    "terms": (4, 6, 8, 10, 12, 16, 20, 24),
    "agree": (0.1, 0.2, 0.3, 0.4, 0.5, 0.6),
    "rare": (1, 2, 3),
    "parts": (2, 3, 4),
}

#: (feature, side, threshold, lead); None is "never"
Lean = tuple[str, str, float, float] | None


def query_features(row: Mapping[str, Any]) -> dict[str, float]:
    """The request's own evidence, read from its pool (nothing of its gold)."""
    from toolscout.discovery.calibrate import AGREE_AT, FEATURES, LONG_TERMS, RARE_CAP

    x = row["x"]
    n = len(FEATURES)
    lexical = x[:, 0]
    hit = lexical > 0
    # the lexical_long column is lexical × min(terms / LONG_TERMS, 1)
    length = float(np.max(x[hit, n + 1] / lexical[hit])) if hit.any() else 0.0
    overlap = len(set(row["lex"][:AGREE_AT]) & set(row["dense"][:AGREE_AT])) / AGREE_AT
    return {
        "terms": round(length * LONG_TERMS),
        "agree": overlap,
        "rare": round(float(np.max(x[:, n])) * RARE_CAP) if len(x) else 0,
        "parts": float(row["parts"]),
    }


def order_fn(weights: Sequence[float], blend: float, lead: float) -> Callable[[Any], list[str]]:
    """The ranker's order (``blend`` of the fixed fusion), plus ``lead`` × BM25."""
    from toolscout.discovery.calibrate import FEATURES, blended

    cols = len(FEATURES)
    w = np.asarray(blended(weights[:cols], blend), dtype=np.float64)

    def order(row: Mapping[str, Any]) -> list[str]:
        s = row["x"][:, :cols] @ w + lead * row["x"][:, 0]
        return [row["ids"][i] for i in np.argsort(-s, kind="stable")]

    return order


def per_query(rows: Sequence[Mapping[str, Any]], order: Callable[[Any], list[str]]) -> Any:
    """recall@5 and complete@5 of each query (2 × n array)."""
    out = np.zeros((2, len(rows)))
    for i, row in enumerate(rows):
        gold = set(row["gold"])
        top = set(order(row)[:5])
        out[0, i] = len(gold & top) / max(len(gold), 1)
        out[1, i] = float(gold <= top)
    return out


def leans() -> list[Lean]:
    return [None] + [
        (f, side, t, lead)
        for f, ts in THRESHOLDS.items()
        for t in ts
        for side in (">=", "<")
        for lead in LEADS
    ]


def on(lean: Lean, feats: Mapping[str, float]) -> bool:
    if lean is None:
        return False
    f, side, t, _ = lean
    return feats[f] >= t if side == ">=" else feats[f] < t


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--limit", type=int, default=None, help="N queries per set (seeded)")
    parser.add_argument("--cache", type=Path, required=True, help="indexed sets, pools")
    parser.add_argument("--fits", type=Path, required=True, help="a quality.py JSON")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/orders_lean.json")
    args = parser.parse_args(args_list)

    from toolscout.embed.minilm import MiniLMEmbedder

    fits = json.loads(args.fits.read_text(encoding="utf-8"))["fits"]
    embedder = MiniLMEmbedder()
    by_set = pools_by_set(args.bench, args.cache, args.limit, embedder)
    names = list(by_set)
    grid = leans()
    # per set: the best part's recall and complete, each lean's per-query arrays
    best: dict[str, np.ndarray] = {}
    scored: dict[str, dict[int, np.ndarray]] = {}
    feats: dict[str, list[dict[str, float]]] = {}
    for name, rows in by_set.items():
        parts = [
            per_query(rows, lambda r: r["lex"]),
            per_query(rows, lambda r: r["dense"]),
            per_query(rows, fixed_order),
        ]
        best[name] = max(parts, key=lambda p: float(p[0].mean()))
        fit = fits[name]
        w, blend = fit["prior"][:-1], float(fit["blend"])
        base = per_query(rows, order_fn(w, blend, 0.0))
        leaning = {lead: per_query(rows, order_fn(w, blend, lead)) for lead in LEADS}
        feats[name] = [query_features(r) for r in rows]
        scored[name] = {}
        for i, lean in enumerate(grid):
            mask = np.array([on(lean, f) for f in feats[name]], dtype=bool)
            arr = base.copy()
            if lean is not None and mask.any():
                arr[:, mask] = leaning[lean[3]][:, mask]
            scored[name][i] = arr

    def margin(name: str, i: int) -> float:
        m = scored[name][i].mean(axis=1) - best[name].mean(axis=1)
        return float(m.min())

    results: dict[str, Any] = {}
    for held in [*names, None]:
        others = [n for n in names if n != held]
        best_i = 0
        key = (min(margin(n, 0) for n in others), float(np.mean([margin(n, 0) for n in others])))
        for i in range(1, len(grid)):
            k = (min(margin(n, i) for n in others), float(np.mean([margin(n, i) for n in others])))
            if k[0] > key[0] + 1e-9 or (k[0] > key[0] - 1e-9 and k[1] > key[1] + 1e-9):
                best_i, key = i, k
        lean = grid[best_i]
        row: dict[str, Any] = {
            "lean": "never" if lean is None else f"{lean[0]}{lean[1]}{lean[2]:g} lead {lean[3]:g}",
            "others worst, mean margin": [round(key[0], 4), round(key[1], 4)],
        }
        if held is not None:
            arr, base = scored[held][best_i], scored[held][0]
            row.update(
                queries=len(by_set[held]),
                leaned=float(np.mean([on(lean, f) for f in feats[held]])),
                best_part=[round(float(v), 4) for v in best[held].mean(axis=1)],
                ranker=[round(float(v), 4) for v in base.mean(axis=1)],
                held_out=[round(float(v), 4) for v in arr.mean(axis=1)],
            )
        if held is None:
            # the ceiling, not a result: the lean chosen on all six, each set in it
            row["in-set"] = {
                n: [round(float(v), 4) for v in scored[n][best_i].mean(axis=1)] for n in names
            }
        results[held or "all"] = row
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "command": command_line("benchmarks/orders_lean.py", args_list),
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "sets": results,
        "bm25": {n: [round(float(v), 4) for v in per_query(by_set[n], lambda r: r["lex"])
                     .mean(axis=1)] for n in names},
    }, indent=1))  # fmt: skip
    print("| set | lean chosen without it | requests leaned | best part | ranker | held out |")
    print("|---|---|---|---|---|---|")
    for name, r in results.items():
        if name == "all":
            continue
        cell = " | ".join(f"{v[0]:.3f} / {v[1]:.3f}" for v in
                          (r["best_part"], r["ranker"], r["held_out"]))  # fmt: skip
        print(f"| {name} | {r['lean']} | {r['leaned']:.0%} | {cell} |")
    every = results["all"]
    print("chosen on all six (in-set, a ceiling):", every["lean"], every["in-set"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
