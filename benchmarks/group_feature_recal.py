"""Each indexed set in a directory calibrated again from the tree's ``logit.PRIOR``.

A tree whose ranker reads one more column than the base refuses the base's stored
calibrations (``Calibration.from_json``: a calibration of another width); the in-set check
(``benchmarks/quality_ship.py``) needs each set's catalog calibrated from the new prior,
as ``Catalog.calibrate()`` does after indexing. Run on a copy of the indexed sets:
``PYTHONPATH=src .venv/bin/python benchmarks/group_feature_recal.py DIR``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not Path(args[0]).is_dir():
        raise SystemExit(
            f"usage: group_feature_recal.py DIR (a directory of indexed sets); got {args}"
        )
    from toolscout.discovery.calibrate import FEATURES, PRIOR
    from toolscout.discovery.catalog import Catalog
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.settings import SearchSettings

    dbs = sorted(Path(args[0]).glob("*.db"))
    if not dbs:
        raise SystemExit(f"no indexed set (*.db) in {args[0]}")
    embedder = MiniLMEmbedder()
    for db in dbs:
        with Catalog.open(db, embedder=embedder, log=False, settings=SearchSettings()) as cat:
            cal = cat.calibrate()
            if len(cal.weights) != len(FEATURES) or cal.prior != PRIOR:
                raise SystemExit(f"{db.name}: calibrated with {len(cal.weights)} weights, "
                                 f"not from the tree's prior of {len(FEATURES)}")  # fmt: skip
            groups = len(cat.phrases().fields.group)
            print(db.name, f"tools with group terms {groups}", cal.describe(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
