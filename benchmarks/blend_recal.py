"""Each indexed set in a directory calibrated again by this tree (its blend evidence).

A calibration carries each catalog's blend evidence (``blend_recall``: the multi-tool
pseudo-queries' recall@5 at each of ``ranker.BLENDS``) only when it was measured — when
``ranker.BLEND_MARGIN`` is set (this script sets it to 0 for its own run when the tree has
it off). ``quality.py --blend-by catalog`` reads the evidence from each set's stored
calibration, so a copy of the indexed sets is calibrated again first. The
ranker's weights must come out as the older calibration's (the fit does not read the
multi-tool pseudo-queries): each set's largest weight difference is printed, and a
difference above 1e-9 stops the run (``--allow-changed``: reported only).

Run on a copy of the indexed sets: ``PYTHONPATH=src .venv/bin/python
benchmarks/blend_recal.py DIR [--allow-changed]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="a directory of indexed sets (*.db)")
    parser.add_argument("--allow-changed", action="store_true")
    args = parser.parse_args(argv)
    dbs = sorted(args.dir.glob("*.db")) if args.dir.is_dir() else []
    if not dbs:
        raise SystemExit(f"error: no indexed set (*.db) in {args.dir}")

    from toolscout.discovery import ranker
    from toolscout.discovery.catalog import Catalog
    from toolscout.discovery.search import CALIBRATION_META
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.settings import SearchSettings

    if ranker.BLEND_MARGIN is None:  # the choice is off in this tree: measure the evidence
        ranker.BLEND_MARGIN = 0.0  # anyway (only the measurement reads it here)
    embedder = MiniLMEmbedder()
    for db in dbs:
        with Catalog.open(db, embedder=embedder, log=False, settings=SearchSettings()) as cat:
            raw = cat.store.meta(CALIBRATION_META)
            old = json.loads(raw) if raw else {}
            cal = cat.calibrate()
            before = old.get("weights") or []
            diff = (
                max(abs(a - b) for a, b in zip(before, cal.weights, strict=True))
                if len(before) == len(cal.weights)
                else float("inf")
            )
            print(
                f"{db.stem}: blend evidence {cal.blend_recall}; weights moved by at most "
                f"{diff:.2e} (calibration version {old.get('version')} → {cal.version})",
                flush=True,
            )
            if diff > 1e-9 and not args.allow_changed:
                raise SystemExit(f"error: {db.stem}'s ranker weights changed by {diff:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
