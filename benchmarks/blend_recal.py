"""Each indexed set in a directory calibrated again by this tree, and its blend evidence.

Each catalog's blend evidence (the multi-tool pseudo-queries' recall@5 at each of
``catalog_evidence.BLENDS``) is measured by ``catalog_evidence.measure`` and printed; until
round twenty-five the calibration stored it (``blend_recall``, with ``ranker.BLEND_MARGIN``
set) and ``quality.py --blend-by catalog`` read it from there, so a copy of the indexed sets
was calibrated again first — now ``quality.py`` measures it itself. The calibration is still
fitted again and stored (a tree with another prior, ``blend_ship_tree.py``, needs each
set's copy refitted); the ranker's weights must come out as the older calibration's: each
set's largest weight difference is printed, and a difference above 1e-9 stops the run
(``--allow-changed``: reported only).

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

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from catalog_evidence import measure
    from toolscout.discovery.catalog import Catalog
    from toolscout.discovery.search import CALIBRATION_META
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.settings import SearchSettings

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
                f"{db.stem}: blend evidence {measure(cat)['blend_recall']}; weights moved by "
                f"at most "
                f"{diff:.2e} (calibration version {old.get('version')} → {cal.version})",
                flush=True,
            )
            if diff > 1e-9 and not args.allow_changed:
                raise SystemExit(f"error: {db.stem}'s ranker weights changed by {diff:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
