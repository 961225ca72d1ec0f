"""Refit the stored calibrations of indexed sets in this tree, and compare with what was stored.

The cross-fit (h/xfit18, not shipped; ``--cross-fit``: the new ``pseudo_recall`` is
``catalog_evidence.cross_fitted_recall``'s, what ``calibrate.CROSS_FIT`` on stored until round
twenty-five moved it here) changes only how ``pseudo_recall`` is read; the weights must come
out as the stored fit's. For each ``--sets`` catalog in
``--cache`` (a copy: the new calibration is written to it) this reads the stored
calibration's JSON, fits again as ``Catalog.calibrate`` does after indexing, and prints
whether the weights, the none bias, the prior and ``orders`` are equal bit for bit, the
largest difference of a weight, and the pseudo recall before and after (a stored
``blend_recall``, which the product no longer writes, is reported beside). (A
fit in another process moves the weights' last bits — the fit's sums are BLAS products
whose rounding follows memory alignment — so the base tree refitting its own stored
calibrations differs by as much: run it with the base's ``PYTHONPATH`` on another copy to
see it; ``tests/test_xfit18_crossfit.py`` checks the weights bit for bit in one process.)

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/xfit_refit.py --cache COPY [--cross-fit]
[--sets a,b] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SAME = ("weights", "none_bias", "prior", "prior_none", "orders")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--sets", default="apibench,bfcl,metatool,restbench,toolalpaca,toolbench")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--cross-fit",
        action="store_true",
        help="the new pseudo_recall cross-fitted (catalog_evidence.cross_fitted_recall)",
    )
    args = parser.parse_args(argv)
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    missing = [n for n in names if not (args.cache / f"{n}.db").is_file()]
    if missing:
        raise SystemExit(f"error: no indexed set {missing} in {args.cache}")

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from catalog_evidence import catalog_runs, cross_fitted_recall
    from toolscout.discovery.catalog import Catalog
    from toolscout.discovery.search import CALIBRATION_META
    from toolscout.embed.minilm import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    out: dict[str, Any] = {}
    bad = 0
    for name in names:
        with Catalog.open(args.cache / f"{name}.db", embedder=embedder, log=False) as cat:
            raw = cat.store.meta(CALIBRATION_META)
            if not raw:
                raise SystemExit(f"error: {name} holds no stored calibration to compare with")
            old = json.loads(raw)
            new = json.loads(cat.calibrate().to_json())
            runs = catalog_runs(cat, multi=False) if args.cross_fit else None
            if runs is not None:
                new["pseudo_recall"] = cross_fitted_recall(runs)
        same = {k: old.get(k) == new.get(k) for k in SAME}
        bad += not all(same.values())
        out[name] = {
            "version": [old.get("version"), new.get("version")],
            "same": same,
            "pseudo_recall": [old.get("pseudo_recall"), new.get("pseudo_recall")],
            "largest_weight_difference": max(
                abs(a - b)
                for a, b in zip(
                    [*old["weights"], old["none_bias"]],
                    [*new["weights"], new["none_bias"]],
                    strict=True,
                )
            ),
            "blend_recall": [old.get("blend_recall"), new.get("blend_recall")],
            "old": old,
            "new": new,
        }
        print(
            f"{name}: v{old.get('version')} -> v{new.get('version')}; bit-identical "
            + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in same.items())
            + f"; largest weight difference {out[name]['largest_weight_difference']:.1e}"
            + f"; pseudo recall {old.get('pseudo_recall')} -> {new.get('pseudo_recall')}",
            flush=True,
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n", "utf-8")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
