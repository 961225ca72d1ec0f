"""Screen for issue 23 item 3's evidence, cross-fitted (h/xfit18).

The lexical lead reads one number of a catalog's calibration: BM25's pseudo-query recall@5 minus
the learned ranker's (``calibrate.leads_lexical``, margin ``LEAD_MARGIN``). Until this round the
ranker's was read on the held-out fifth of the single-tool pseudo-queries only (``i % 5 == 0``:
23–80 queries on the dev sets); the cross-fit scores every fifth with a ranker fitted on the
other four (``calibrate.fold_fits``), so every single-tool pseudo-query counts. For each dev
set's catalog and each seed of the pseudo-queries, this prints the gap, its cluster-robust SE
(``evaluate.fitting.clustered_difference``: the queries of one tool are one cluster) and n,
before (the fifth) and after (every fold), and the lead each margin of ``quality.LEAD_MARGINS``
decides; then, per margin, on how many sets the seeds agree. The pseudo-queries, their
retrieval, the fold-0 fit and the fold fits are the calibration's own functions
(``calibrate.pseudo_queries``, ``pseudo_examples``, ``fold_fits``, ``single_hits``; the runs read
by ``catalog_evidence.catalog_runs``, where the cross-fit itself lives since round twenty-five:
``cross_fitted_recall``). Index time, cards only: no evaluation query is read.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/xfit_screen.py --cache SETS
[--seeds 20261130,20261131,20261132,20261133] [--json OUT]`` (``--cache``: the indexed sets;
nothing is written to them).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality
from catalog_evidence import catalog_runs

SEEDS = (20261130, 20261131, 20261132, 20261133)


def rows(cat: Any, seed: int) -> list[dict[str, Any]]:
    """Every single-tool pseudo-query of this seed with its fold and its three hits (the
    ranker's: the fold's own, fitted without it)."""
    from toolscout.discovery import calibrate as cal_mod

    got = catalog_runs(cat, seed, multi=False)
    if got is None:
        return []
    pseudo, runs, examples = got.pseudo, got.runs, got.examples
    fits = cal_mod.fold_fits(examples, cal_mod.PRIOR, cal_mod.PRIOR_NONE, cal_mod.FOLDS)
    return cal_mod.single_hits(pseudo, runs, examples, [w for w, _ in fits])


def gap(got: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """BM25 − ranker over ``got``: [mean, SE, n] (``evaluate.fitting.clustered_difference``)
    and the means."""
    from toolscout.evaluate.fitting import clustered_difference

    diffs = [r["bm25"] - r["ranker"] for r in got]
    n = max(len(got), 1)
    return {
        "gap": clustered_difference(diffs, [r["tool"] for r in got]),
        "recall": {k: round(sum(r[k] for r in got) / n, 3) for k in ("bm25", "dense", "ranker")},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, required=True, help="the indexed sets")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(
            f"error: --seeds must be comma-separated integers, got {args.seeds!r}"
        ) from None
    if not seeds:
        raise SystemExit("error: --seeds names no seed")

    from toolscout.discovery.catalog import Catalog
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.settings import SearchSettings

    embedder = MiniLMEmbedder()
    margins = quality.LEAD_MARGINS
    out: dict[str, Any] = {}
    for d in quality.bench_sets(args.bench):
        db = args.cache / f"{d.name}.db"
        if not db.is_file():
            raise SystemExit(f"error: {db} is missing: index the set into --cache first")
        out[d.name] = {}
        with Catalog.open(db, embedder=embedder, log=False, settings=SearchSettings()) as cat:
            for seed in seeds:
                got = rows(cat, seed)
                fifth, every = gap([r for r in got if r["fold"] == 0]), gap(got)
                cell: dict[str, Any] = {"fifth": fifth, "cross": every}
                for ev in (fifth, every):
                    ev["leads"] = {f"{m:g}": ev["gap"][0] > m for m in margins}
                out[d.name][str(seed)] = cell
                (fd, fs, fn), (cd, cs, cn) = fifth["gap"], every["gap"]
                print(
                    f"{d.name:<11} {seed}: fifth {fd:+.3f} ± {fs:.3f} (n {int(fn)})  "
                    f"cross {cd:+.3f} ± {cs:.3f} (n {int(cn)})  SE ratio "
                    f"{cs / fs if fs else float('nan'):.2f}",
                    flush=True,
                )
    agree: dict[str, dict[str, int]] = {"fifth": {}, "cross": {}}
    for key in agree:
        for m in margins:
            agree[key][f"{m:g}"] = sum(
                len({cells[str(s)][key]["leads"][f"{m:g}"] for s in seeds}) == 1
                for cells in out.values()
            )
    print(f"sets (of {len(out)}) whose seeds all decide the lead alike, by margin:")
    for key, counts in agree.items():
        print(f"  {key:<5} " + ", ".join(f"{m} {v}" for m, v in counts.items()))
    if args.json:
        argv_list = list(sys.argv[1:] if argv is None else argv)
        quality.write_results(
            args.json,
            quality.command_line("benchmarks/xfit_screen.py", argv_list),
            seeds=seeds,
            sets=out,
            agree=agree,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
