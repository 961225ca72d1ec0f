"""A set held out with *every* constant of its fold, the lexical lead's margin included.

``quality.py``'s held-out column is its blend grid, measured before the lead margin is
chosen: it never applies the fold's margin. This scores one set as the fold would run it —
``quality.held_settings(fit)`` with the fit's lead margin, at the fit's (blend, yield),
``fitting.recall_grid`` as the grid scores it — and beside it with the lead forced off
(margin 1) and on (margin -1). Read the set's calibration with the tree that wrote it (a
calibration of another ``calibrate.VERSION`` is refused and the lead never fires).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/blend_lead_held_out.py --fits FITS
--cache SETS [--set toolalpaca] [--json OUT]``.
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fits", type=Path, required=True, help="a quality.py --fits-only JSON")
    parser.add_argument("--cache", type=Path, required=True, help="the indexed sets")
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--set", default="toolalpaca")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        fit = json.loads(args.fits.read_text(encoding="utf-8"))["fits"][args.set]
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"error: {args.fits} holds no fit without {args.set!r} ({exc})") from exc
    d = args.bench / args.set
    if not (d / "queries.jsonl").is_file():
        raise SystemExit(f"error: no set {args.set!r} under {args.bench}")

    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.fitting import mean, recall_grid

    embedder = MiniLMEmbedder()
    pair = (float(fit["blend"]), float(fit["dedupe_yield"]))
    out: dict[str, Any] = {"blend/yield": list(pair), "fold lead margin": fit["lead_margin"]}
    for label, margin in (("fold", fit["lead_margin"]), ("never", 1.0), ("always", -1.0)):
        complete: dict[Any, list[float]] = {}
        settings = quality.held_settings(fit).but(lexical_lead_margin=margin)
        with quality.opened_set(d, args.cache, None, embedder) as (cat, queries):
            got = recall_grid(cat, queries, settings, (pair[0],), (pair[1],), complete=complete)
        out[label] = [round(mean(got[pair]), 4), round(mean(complete[pair]), 4)]
        print(f"{args.set} held out, lead {label} (margin {margin:g}): {out[label]}", flush=True)
    if args.json:
        argv_list = list(sys.argv[1:] if argv is None else argv)
        quality.write_results(
            args.json, quality.command_line("benchmarks/blend_lead_held_out.py", argv_list), **out
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
