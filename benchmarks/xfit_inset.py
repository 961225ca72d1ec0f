"""In-set, what the cross-fitted evidence's lead margin would do (h/xfit18).

With the lead's evidence cross-fitted (``xfit_refit.py --cross-fit``), ``quality.py``'s all-six
fit chooses another lexical-lead margin (``--fits``' "all" row, ``lead_margin``) than
ships (``ranker.LEAD_MARGIN``). Only the sets whose lead that decides otherwise can move;
this runs each named set's queries through the product default in-set (each set's own
calibration, as stored in ``--cache``), with the shipped constants and with the fit's
margin only (``SearchSettings(lexical_lead_margin=...)``), and applies the rule: no set
may lose more than ``quality_ship.MAX_LOSS`` of recall@5 or complete@5. Each query is
scored as ``quality_ship.scores`` scores it (``discover(k=10, tier="progressive")``).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/xfit_inset.py --fits FITS --cache SETS
[--sets toolalpaca,toolbench] [--json OUT]``.
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
import quality_ship


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fits", type=Path, required=True, help="quality.py --fits-only JSON")
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, required=True, help="the indexed sets")
    parser.add_argument("--sets", default="toolalpaca,toolbench")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        margin = float(
            json.loads(args.fits.read_text(encoding="utf-8"))["fits"]["all"]["lead_margin"]
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"error: {args.fits} holds no all-six lead_margin ({exc})") from exc
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    known = {d.name: d for d in quality.bench_sets(args.bench)}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"error: no dev set {unknown} in {args.bench}")

    from toolscout.discovery.calibrate import Calibration
    from toolscout.discovery.ranker import LEAD_MARGIN
    from toolscout.discovery.search import CALIBRATION_META
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.settings import SearchSettings

    embedder = MiniLMEmbedder()
    out: dict[str, Any] = {}
    for name in names:
        with quality.opened_set(known[name], args.cache, None, embedder) as (cat, queries):
            cal = Calibration.from_json(cat.store.meta(CALIBRATION_META) or "")
            if cal is None:
                raise SystemExit(f"error: {name}'s stored calibration is of another version")
            shipped = quality_ship.scores(cat, queries, SearchSettings())
            fitted = quality_ship.scores(cat, queries, SearchSettings(lexical_lead_margin=margin))
        out[name] = quality_ship.compare(shipped, fitted)
        out[name]["leads"] = [cal.leads_lexical(LEAD_MARGIN), cal.leads_lexical(margin)]
        out[name]["pseudo_recall"] = cal.pseudo_recall
        print(
            f"{name} (leads at {LEAD_MARGIN:g} / {margin:g}: {out[name]['leads']}): "
            + quality_ship.summary(out[name]),
            flush=True,
        )
    broken = quality_ship.verdict(out)
    print("ships" if not broken else "does not ship: " + "; ".join(broken))
    if args.json:
        argv_list = list(sys.argv[1:] if argv is None else argv)
        quality.write_results(
            args.json,
            quality.command_line("benchmarks/xfit_inset.py", argv_list),
            margins=[LEAD_MARGIN, margin],
            sets=out,
            breaks=broken,
            max_loss=quality_ship.MAX_LOSS,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
