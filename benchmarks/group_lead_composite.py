"""Held-out recall@5 / complete@5 of round twenty-two's group_lead *as it would have shipped*.

h/grp16 proposed shipping the base's nine ranker weights with a tenth, group_lead's, taken
from a full six-set fit of all ten. Its held-out figures came from leave-one-set-out refits
of all ten weights, which is not that construction. This script scores the construction
itself per fold: for each held-out set, the base's fold prior (its nine weights and its
"none" constant, ``--base-json``: the base's quality.json) with the tenth weight of the
ten-weight fit made without that set (``--lead-json``: the round's fit), at the base fold's
blend, yield, Platt step and lead margin, through ``fitting.recall_grid`` as quality.py
scores its held-out default.

It needs the ship candidate's code (h/grp16 at 105e462: ``features.FEATURES`` ending in
group_lead) on ``PYTHONPATH`` and that tree's ``benchmarks`` directory (``--tree``), and the
indexed dev sets (``--cache``: a copy, the kept phrase index is derived again in it)::

    PYTHONPATH=TREE/src .venv/bin/python benchmarks/group_lead_composite.py --tree TREE \\
        --base-json benchmarks/results/quality.json \\
        --lead-json benchmarks/results/quality_grp16_lead.json --cache DIR \\
        --json benchmarks/results/quality_grp16_composite_held_out.json

``--nine shipped`` reads it the other way: the shipped nine weights, which predate toolbench
as a dev set, so the figure is held out for toolbench alone (``--sets toolbench``);
``--tenth zero`` scores the same without the column, for the difference.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import mean
from typing import Any


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, required=True, help="a checkout of the ship candidate")
    ap.add_argument("--base-json", type=Path, required=True)
    ap.add_argument("--lead-json", type=Path, required=True)
    ap.add_argument("--bench", type=Path, default=Path("../shared/bench"))
    ap.add_argument("--cache", type=Path, required=True, help="indexed dev sets (a copy)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--nine",
        choices=("fold", "shipped"),
        default="fold",
        help="the nine weights and 'none' constant: the base fold's (default), or the shipped "
        "ones (the candidate's logit.PRIOR[:9] and PRIOR_NONE, fitted before toolbench was a "
        "dev set: held out for toolbench only)",
    )
    ap.add_argument(
        "--tenth",
        choices=("fold", "zero"),
        default="fold",
        help="group_lead's weight: the fold's ten-weight fit's (default), or 0",
    )
    ap.add_argument("--sets", default="", help="only these sets, comma-separated")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(args.tree / "benchmarks"))
    import quality  # the candidate tree's, for its opened_set and held_settings
    from toolscout.discovery.features import FEATURES
    from toolscout.discovery.logit import PRIOR, PRIOR_NONE
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.fitting import recall_grid

    if FEATURES[-1] != "group_lead":
        ap.error(
            f"the code on PYTHONPATH has no group_lead column (FEATURES ends {FEATURES[-1]!r})"
        )
    base = json.loads(args.base_json.read_text())
    lead = json.loads(args.lead_json.read_text())
    nine = len(FEATURES) - 1
    embedder = MiniLMEmbedder()
    out: dict[str, Any] = {}
    print("| set | held out, as it would ship | base held out | ten-weight refit | best part |")
    print("|---|---|---|---|---|")
    wanted = {n for n in args.sets.split(",") if n}
    for d in quality.bench_sets(args.bench):
        n = d.name
        if wanted and n not in wanted:
            continue
        bf, lf = base["fits"][n], lead["fits"][n]
        weights, none = (
            (bf["prior"][:nine], bf["prior"][nine])
            if args.nine == "fold"
            else (list(PRIOR[:nine]), PRIOR_NONE)
        )
        tenth = lf["prior"][nine] if args.tenth == "fold" else 0.0
        fit = dict(bf, prior=[*weights, tenth, none])
        pair = (bf["blend"], bf["dedupe_yield"])
        complete: dict[Any, list[float]] = {}
        with quality.opened_set(d, args.cache, None, embedder) as (cat, scored):
            settings = quality.held_settings(fit)
            got = recall_grid(cat, scored, settings, [pair[0]], [pair[1]], complete=complete)
        row = {
            "prior": fit["prior"],
            "held_out": [round(mean(got[pair]), 4), round(mean(complete[pair]), 4)],
            "base_held_out": base["grid"][n]["held_out"],
            "ten_weight_refit_held_out": lead["grid"][n]["held_out"],
            "best_part": base["grid"][n]["best_part"],
        }
        out[n] = row
        print(
            f"| {n} | {row['held_out'][0]:.4f} / {row['held_out'][1]:.4f} | "
            f"{row['base_held_out'][0]:.4f} / {row['base_held_out'][1]:.4f} | "
            f"{row['ten_weight_refit_held_out'][0]:.4f} / {row['ten_weight_refit_held_out'][1]:.4f}"
            f" | {row['best_part']:.4f} |",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
