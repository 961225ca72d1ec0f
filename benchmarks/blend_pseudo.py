"""Does a catalog's own pseudo-query evidence say which blend its real requests prefer?

Lead (c) of issue 23's blend brief (h/blend17): choose the blend of the fixed fusion per
catalog, at index time, from the catalog's cards alone — the way the lexical lead is chosen.
Before building it, the premise is checked: for each dev set, the calibration's own
pseudo-queries (``calibrate.pseudo_queries``: single-tool, the held-out fifth the calibration
reports on; ``orders.multi_queries``: two or three tools joined) are ordered by the ranker
(its fitted weights + blend × the fixed fusion) at each blend of the grid, and their
recall@5 (and the multi-tool ones' complete@5) reported beside the set's real held-out
preference (``quality.py``'s grid: recall@5 at blend 4 minus at 32, same yield). No
evaluation query is read to make a pseudo figure.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/blend_pseudo.py --cache SETS
[--grid QUALITY_JSON] [--blends 4,32] [--seed N] [--json OUT]`` (``--cache``: the indexed sets,
read only).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality


def pseudo_by_blend(
    cat: Any, blends: Sequence[float], seed: int | None = None
) -> dict[str, dict[str, float]]:
    """The ranker order's pseudo-query figures at each blend (one calibration, measured
    once per blend: the fit itself does not read the blend)."""
    from toolscout.discovery import calibrate as cal_mod
    from toolscout.discovery.queryvectors import embed_keys
    from toolscout.settings import SearchSettings

    retriever = cat.retriever(SearchSettings())
    specs = cat.specs()
    allowed = frozenset(s.id for s in specs)
    out: dict[str, dict[str, float]] = {}
    for blend in blends:
        got = cal_mod.calibrate(
            specs,
            lambda texts, vecs: retriever.pools(texts, vecs, allowed),
            retriever.phrases.fields,
            retriever.phrases.idf,
            embed=lambda texts: retriever._embed_all(embed_keys(texts), cache=False),
            blend=blend,
            measure_orders=True,
            seed=cal_mod.SEED if seed is None else seed,
        )
        out[f"{blend:g}"] = {
            "single": got.orders["single"]["ranker"],
            "multi_recall": got.orders.get("multi_recall", {}).get("ranker", float("nan")),
            "multi_complete": got.orders.get("multi_complete", {}).get("ranker", float("nan")),
            "ranker_unblended": got.pseudo_recall.get("ranker", float("nan")),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, required=True, help="the indexed sets")
    parser.add_argument("--grid", type=Path, default=None, help="a quality.py --fits-only JSON")
    parser.add_argument(
        "--blends", type=lambda v: tuple(float(x) for x in v.split(",")), default=(4.0, 32.0)
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="the pseudo-queries' seed (default: the product's)"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if len(args.blends) < 2:
        raise SystemExit(f"error: --blends needs at least two blends, got {args.blends}")
    grid = json.loads(args.grid.read_text(encoding="utf-8"))["grid"] if args.grid else {}

    from toolscout.discovery.catalog import Catalog
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.settings import SearchSettings

    embedder = MiniLMEmbedder()
    out: dict[str, Any] = {}
    lo, hi = f"{args.blends[0]:g}", f"{args.blends[-1]:g}"
    for d in quality.bench_sets(args.bench):
        db = args.cache / f"{d.name}.db"
        with Catalog.open(db, embedder=embedder, log=False, settings=SearchSettings()) as cat:
            got = pseudo_by_blend(cat, args.blends, args.seed)
        real = grid.get(d.name, {})
        pairs = [k for k in real if k.startswith(f"{lo}/")]
        real_diff = {
            k.split("/")[1]: round(real[k] - real[f"{hi}/{k.split('/')[1]}"], 4)
            for k in pairs
            if f"{hi}/{k.split('/')[1]}" in real
        }
        out[d.name] = {"pseudo": got, f"real {lo} − {hi} by yield": real_diff}
        p_lo, p_hi = got[lo], got[hi]
        print(
            f"{d.name}: pseudo single {p_lo['single']:.3f} vs {p_hi['single']:.3f}, multi "
            f"recall {p_lo['multi_recall']:.3f} vs {p_hi['multi_recall']:.3f}, complete "
            f"{p_lo['multi_complete']:.3f} vs {p_hi['multi_complete']:.3f}; real {real_diff}",
            flush=True,
        )
    if args.json:
        argv_list = list(sys.argv[1:] if argv is None else argv)
        quality.write_results(
            args.json, quality.command_line("benchmarks/blend_pseudo.py", argv_list), sets=out
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
