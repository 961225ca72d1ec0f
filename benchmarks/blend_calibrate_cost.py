"""What a catalog's calibration costs at index time, in this tree (one process per run).

The per-catalog blend (h/blend17) writes 64 multi-tool pseudo-queries more per calibration
and runs them through both retrievers; this times ``Catalog.calibrate()`` (a fresh fit,
as a ``calibrate.VERSION`` bump or a changed catalog makes it) on each named set's copy.
Run it A/B/A/B against the base tree under the heavy lock:
``flock /tmp/heavy.lock env PYTHONPATH=TREE/src .venv/bin/python
benchmarks/blend_calibrate_cost.py --cache COPY --sets bfcl,toolbench --label NAME --json
OUT`` (COPY: a copy of the indexed sets; it is written to).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--sets", default="bfcl,toolbench")
    parser.add_argument("--label", required=True)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    missing = [n for n in names if not (args.cache / f"{n}.db").is_file()]
    if missing:
        raise SystemExit(f"error: no indexed set {missing} in {args.cache}")

    from toolscout.discovery.catalog import Catalog
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.settings import SearchSettings

    embedder = MiniLMEmbedder()
    embedder.embed(["warm the encoder up"])
    out: dict[str, float] = {}
    for name in names:
        with Catalog.open(
            args.cache / f"{name}.db", embedder=embedder, log=False, settings=SearchSettings()
        ) as cat:
            start = time.perf_counter()
            cal = cat.calibrate()
            out[name] = round(time.perf_counter() - start, 2)
            print(f"{args.label} {name}: calibrate {out[name]:.2f} s ({cal.n_pseudo} pseudo)")
    if args.json:
        args.json.write_text(json.dumps({"label": args.label, "seconds": out}) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
