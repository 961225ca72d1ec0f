"""The blend margin's leave-one-set-out choice replayed on another sample of evidence.

``catalog_evidence.choose_blend_margin`` over the held-out grids ``quality.py --stages`` keeps (each
set's per-query recall@5 and complete@5 at each (blend, yield), the prior fitted without
it), with each set's evidence read from a ``blend_pseudo.py`` JSON (its multi-tool pseudo
recall@5 at 4 and 32) instead of the stored calibrations: does the rule still keep every
set at or above its best part when the pseudo-queries are drawn with another seed?

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/blend_margin_replay.py PSEUDO_JSON
STAGES``.
"""

from __future__ import annotations

import json
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or not Path(args[0]).is_file() or not Path(args[1]).is_dir():
        raise SystemExit(f"usage: blend_margin_replay.py PSEUDO_JSON STAGES_DIR; got {args}")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from catalog_evidence import catalog_blend, choose_blend_margin
    from toolscout.evaluate.fitting import mean

    sets = json.loads(Path(args[0]).read_text(encoding="utf-8"))["sets"]
    evidence = {n: {k: v["multi_recall"] for k, v in s["pseudo"].items()} for n, s in sets.items()}
    grids: dict[str, Any] = {}
    completes: dict[str, Any] = {}
    parts: dict[str, list[float]] = {}
    part_complete: dict[str, float] = {}
    for n in evidence:
        found = sorted(Path(args[1]).glob(f"grid-{n}-None-*.pkl"))
        if len(found) != 1:
            raise SystemExit(f"error: expected one grid stage for {n}, found {len(found)}")
        every, grids[n], completes[n] = pickle.loads(found[0].read_bytes())
        parts[n] = max((v[0] for v in every.values()), key=mean)
        part_complete[n] = max(mean(v[1]) for v in every.values())
    print("evidence (4 − 32):", {n: round(e["4"] - e["32"], 3) for n, e in evidence.items()})
    for held in [*evidence, None]:
        margin, y = choose_blend_margin(grids, parts, evidence, held)
        if held is None:
            own = {n: catalog_blend(evidence[n], margin) for n in evidence}
            print(f"all six: margin {margin:g}, yield {y:g}, blends {own}")
            continue
        b = catalog_blend(evidence[held], margin)
        r, c = mean(grids[held][(b, y)]), mean(completes[held][(b, y)])
        ok = r >= mean(parts[held]) and c >= part_complete[held]
        print(
            f"{held}: margin {margin:g}, blend {b:g}, yield {y:g}: held out {r:.4f} / {c:.4f}, "
            f"best part {mean(parts[held]):.4f} / {part_complete[held]:.4f}"
            + ("" if ok else " BELOW")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
