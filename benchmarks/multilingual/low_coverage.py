"""With the multilingual option, the dev-set requests the cross-lingual bridge can touch.

Those whose coverage is below ``coverage.LOW_COVERAGE`` (discovery/coverage.py), on the
metatool and toolalpaca catalogs as ``benchmarks/multilingual.py --cache DIR`` indexed
them: how many there are, how many carry a word over, and their recall@5 with the bridge
off (nothing carried over: the tree before it) and on.

    PYTHONPATH=src .venv/bin/python benchmarks/multilingual/low_coverage.py --cache DIR
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from toolscout.discovery import coverage, crosslingual
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.search import parse_query
from toolscout.evaluate.harness import eval_principal

ROOT = Path(__file__).resolve().parents[2]
SETS = ("metatool", "toolalpaca")
#: a match cosine no pair of words reaches: the bridge carries nothing over
OFF = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cache", type=Path, required=True, help="multilingual.py's --cache")
    parser.add_argument("--bench", type=Path, default=ROOT.parent / "shared" / "bench")
    args = parser.parse_args()
    shipped = crosslingual.MATCH_COSINE
    out = {}
    try:
        for name in SETS:
            rows = [json.loads(line) for line in (args.bench / name / "queries.jsonl").open()]
            with Catalog.open(args.cache / f"{name}.multilingual-e5-small.db", log=False) as cat:
                who = eval_principal(cat)
                df, n = cat.store.document_frequency()
                parsed = [(r, parse_query(r["query"], df, n, cat.settings)) for r in rows]
                low = [
                    (r, q)
                    for r, q in parsed
                    if coverage.coverage((*q.terms, *q.dropped), df) < coverage.LOW_COVERAGE
                ]
                got = {"off": 0.0, "on": 0.0}
                carried = sum(crosslingual.bridged(cat.retriever(), q) is not q for _, q in low)
                for r, _ in low:
                    for which in ("off", "on"):
                        crosslingual.MATCH_COSINE = OFF if which == "off" else shipped
                        s = cat.discover(r["query"], who, k=5, tier="progressive", record=False)
                        got[which] += sum(g in s.ids for g in r["gold"]) / len(r["gold"])
                    crosslingual.MATCH_COSINE = shipped
            out[name] = {
                "requests": len(rows),
                "below": len(low),
                "carried": carried,
                **{f"recall@5 {w}": round(v / max(len(low), 1), 3) for w, v in got.items()},
            }
    finally:
        crosslingual.MATCH_COSINE = shipped
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
