"""Which half of round twenty's group change cost toolalpaca in-set: the group column or
the prior refitted with it?

Each set's indexed copy (from ``--cache``, a catalog per set as ``quality.py --cache``
keeps them) is calibrated again from a given ranker prior (``SearchSettings.ranker_prior``,
the calibration's start and centre) and its queries scored as ``quality_ship.py``'s shipped
arm scores them (``Catalog.discover(k=10, tier="progressive")``: recall@5, complete@5),
the other constants as shipped. The priors (:data:`VARIANTS`) are the base's
``logit.PRIOR`` with the group column's weight of the six-set fit, and that fit's prior with
the group weight 0. The group column reaches the product only with the kept phrase index's
group terms (``discovery/keptparts.py`` and ``discovery/derived.py``: see
docs/history/calibration.md, round twenty), so run it on a tree that has them.

Run: ``PYTHONPATH=TREE/src .venv/bin/python benchmarks/group_feature_inset.py --cache DIR
--work DIR2 [--sets toolalpaca,toolbench] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality
from quality_ship import scores

#: the base's shipped prior (6a99005's logit.PRIOR, PRIOR_NONE)
BASE = (2.9926, 0.0528, 2.6806, 1.7125, 3.8062, 1.1823, 1.3601, 0.6734, -1.2883)
BASE_NONE = 4.2753
#: the "all" fit of quality.py --fits-only with the group column (round twenty)
ALL = (3.7248, 0.1155, 2.4053, 2.3152, 2.7243, 1.3077, 0.9252, 0.6472, -1.9945, 1.738)
ALL_NONE = 4.8096
VARIANTS = {
    "all-fit prior, group weight 0": (*ALL[:9], 0.0, ALL_NONE),
    "base prior + group 1.738": (*BASE, ALL[9], BASE_NONE),
}


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, required=True, help="the indexed sets (read)")
    parser.add_argument("--work", type=Path, required=True, help="their recalibrated copies")
    parser.add_argument("--sets", default="toolalpaca,toolbench")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(args_list)

    from toolscout.discovery.features import FEATURES
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.fitting import mean
    from toolscout.settings import SearchSettings

    if len(FEATURES) != len(ALL) or FEATURES[-1] != "group":
        raise SystemExit(f"this tree's ranker does not read the group column: {FEATURES}")
    embedder = MiniLMEmbedder()
    out: dict[str, dict[str, list[float]]] = {}
    for name in args.sets.split(","):
        d = args.bench / name
        if not (d / "queries.jsonl").exists():
            raise SystemExit(f"no set {name!r} under {args.bench}")
        for label, prior in VARIANTS.items():
            work = args.work / label.replace(" ", "_").replace(",", "").replace("+", "p")
            work.mkdir(parents=True, exist_ok=True)
            for f in args.cache.glob(f"{name}.db*"):
                shutil.copy2(f, work / f.name)
            settings = SearchSettings(ranker_prior=prior)
            with quality.opened_set(d, work, None, embedder, settings=settings) as (cat, qs):
                cat.calibrate()  # from this prior
                recall, complete = scores(cat, qs, settings)
            got = [round(mean(recall), 4), round(mean(complete), 4)]
            out.setdefault(name, {})[label] = got
            print(f"{name} | {label} | {got[0]:.4f} / {got[1]:.4f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({
            "command": quality.command_line("benchmarks/group_feature_inset.py", args_list),
            "variants": {k: list(v) for k, v in VARIANTS.items()}, "sets": out,
        }, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
