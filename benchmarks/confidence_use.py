"""Confidence corrected from use: how many logged outcomes a catalog needs.

    PYTHONPATH=src .venv/bin/python benchmarks/confidence_use.py [--cache DIR] [--limit N]

The shared confidence model cannot know one catalog's base rate (on apibench the first
tool is *the* gold one for 9% of requests, by the set's design; 57-74% elsewhere). A
deployment learns it from its discovery log: ``toolscout report`` compares each
discovery's confidence with whether its first tool was then used, and
``--accept-confidence`` stores the one-number correction ``calibrate.fit_shift`` fits.

This script measures that on the dev sets, held out throughout: each set is ranked
with the constants fitted *without* it (``benchmarks/results/quality.json``'s fits, as
``quality.py`` wrote them) and its confidence comes from the confidence model fitted
without it. Then, for each number N of logged outcomes, 200 seeded splits each take N
of the set's requests as the log (outcome: the first tool shown is a gold tool, what a
call of that tool would record), fit the correction on them, and check the corrected
confidence on the other requests: the max gap over deciles holding at least 5% of them
(the issue's measure), beside the gap a perfectly calibrated confidence would show on
the same requests (``quality.calibrated_max_gap``). Requests that showed nothing (their
confidence is 0 by rule) are left out, as the log has no outcome for them.

Prints a table and writes ``benchmarks/results/confidence_use.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality
from toolscout.discovery.calibrate import fit_shift, sigmoid
from toolscout.evaluate.metrics import reliability

ROOT = Path(__file__).resolve().parents[1]
#: logged outcomes tried (a size is skipped when it is more than half the set)
SIZES = (0, 30, 100, 300)
SPLITS = 200
SEED = 20261130


def simulate(z: np.ndarray, right: np.ndarray, n_log: int, rng: Any) -> dict[str, float]:
    """Median (and 90th percentile) held-out max gap after correcting on ``n_log`` outcomes."""
    gaps, floors, shifts = [], [], []
    for _ in range(SPLITS if n_log else 1):
        order = rng.permutation(len(z)) if n_log else np.arange(len(z))
        log, rest = order[:n_log], order[n_log:]
        shift = fit_shift(list(sigmoid(z[log])), list(right[log] > 0)) if n_log else 0.0
        conf = sigmoid(z[rest] + shift)
        rel = reliability(list(zip(conf.tolist(), (right[rest] > 0).tolist(), strict=True)))
        gaps.append(rel["max_gap"])
        floors.append(quality.calibrated_max_gap(rel["deciles"], rounds=200))
        shifts.append(shift)
    return {
        "max_gap": round(float(np.median(gaps)), 3),
        "max_gap_p90": round(float(np.percentile(gaps, 90)), 3),
        "floor": round(float(np.median(floors)), 3),
        "shift": round(float(np.median(shifts)), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--limit", type=int, default=None, help="N queries per set (seeded)")
    parser.add_argument("--cache", type=Path, default=None, help="indexed sets (quality.py's)")
    parser.add_argument("--fits", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument(
        "--json", type=Path, default=ROOT / "benchmarks/results/confidence_use.json"
    )
    args = parser.parse_args(argv)
    if not args.fits.is_file():
        parser.error(f"no fits at {args.fits}: run benchmarks/quality.py first")
    fits = json.loads(args.fits.read_text(encoding="utf-8"))["fits"]

    from toolscout.embed.minilm import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="toolscout-confidence-") as tmp:
        workdir = args.cache or Path(tmp)
        for d in quality.bench_sets(args.bench):
            if d.name not in fits:
                parser.error(f"{args.fits} has no fit without {d.name}")
            fit = fits[d.name]
            index = not (workdir / f"{d.name}.db").is_file()
            with quality.opened_set(d, workdir, args.limit, embedder, index=index) as (cat, qs):
                x, right = quality.confidence_rows(cat, qs, quality.held_settings(fit))
            z = x @ np.asarray(fit["confidence"], dtype=np.float64)
            rng = np.random.default_rng(SEED)
            per = {"requests": len(z), "right_first": round(float(right.mean()), 3)}
            for n in SIZES:
                if n <= len(z) // 2:
                    per[str(n)] = simulate(z, right, n, rng)
            results[d.name] = per
            print(f"{d.name}: {per}", file=sys.stderr, flush=True)

    command = quality.command_line(
        "benchmarks/confidence_use.py", sys.argv[1:] if argv is None else argv
    )
    lines = [
        "| set | requests | first tool right | "
        + " | ".join(
            f"{n} logged: max gap (p90) / calibrated floor / shift"
            if n
            else "cold: max gap / floor"
            for n in SIZES
        )
        + " |",
        "|---|---|---|" + "---|" * len(SIZES),
    ]
    for name, per in results.items():
        cells = []
        for n in SIZES:
            r = per.get(str(n))
            if r is None:
                cells.append("—")
            elif n:
                gap = f"{r['max_gap']:.2f} ({r['max_gap_p90']:.2f})"
                cells.append(f"{gap} / {r['floor']:.2f} / {r['shift']:+.2f}")
            else:
                cells.append(f"{r['max_gap']:.2f} / {r['floor']:.2f}")
        lines.append(
            f"| {name} | {per['requests']} | {per['right_first']:.2f} | " + " | ".join(cells) + " |"
        )
    table = "\n".join(lines)
    print(f"Reproduce with `{command}`\n\n{table}")
    quality.write_results(args.json, command, splits=SPLITS, sets=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
