"""Do two source trees give the same shortlists? A check for changes meant not to rank.

    PYTHONPATH=/tmp/before/src python benchmarks/same_shortlists.py dump before.json --sets DIR
    PYTHONPATH=src python benchmarks/same_shortlists.py dump after.json --sets DIR
    python benchmarks/same_shortlists.py compare before.json after.json

``dump`` runs a seeded sample of each dev set's queries (``--limit`` a set) through
``discover(k=5)`` and ``discover(k=10)`` (progressive tier, product defaults) on catalogs
already indexed in ``--sets`` (``<set>.db``, as ``quality.py --cache`` keeps them) and
writes each shortlist: ids, scores, confidence, the trace's lists, token figures.
``compare`` counts, per set, the rows that are bit-identical, those with the same ids in
the same order (shortlist and trace), and those whose numbers agree within ``--rel``, and
prints the largest relative difference. Dump the same tree twice to see how far it
differs from itself (the ranker's ``x @ w`` is a BLAS call: its last bits can move with
the memory alignment of its operands).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

SETS = ("apibench", "bfcl", "metatool", "restbench", "toolalpaca", "toolbench")
ROOT = Path(__file__).resolve().parents[1]


def dump(out: Path, sets_dir: Path, bench: Path, limit: int) -> None:
    from toolscout.discovery.catalog import Catalog
    from toolscout.discovery.pipeline import discover
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.evalset import read_queries, sample
    from toolscout.policy import Principal

    emb = MiniLMEmbedder()
    who = Principal.of("bench", scopes=["*"])
    rows: dict[str, list[dict[str, Any]]] = {}
    cpu = 0.0
    for name in SETS:
        queries = sample(read_queries(bench / name / "queries.jsonl"), limit)
        with Catalog.open(sets_dir / f"{name}.db", embedder=emb, log=False) as cat:
            got = []
            for q in queries:
                for k in (5, 10):
                    start = time.process_time()
                    s = discover(cat, q.query, who, k=k, tier="progressive")
                    cpu += time.process_time() - start
                    got.append(
                        {
                            "q": q.id,
                            "k": k,
                            "tools": [
                                [t.id, t.score, t.lexical, t.dense, t.exact, t.needed_by]
                                for t in s.tools
                            ],
                            "conf": s.confidence,
                            "low": s.low_confidence,
                            "fused": list(s.trace.fused),
                            "lexical": list(s.trace.lexical),
                            "dense": list(s.trace.dense),
                            "reformulations": list(s.reformulations),
                            "tokens": [s.tokens.catalog, s.tokens.injected],
                            "abstained": s.abstained,
                        }
                    )
            rows[name] = got
    out.write_text(json.dumps(rows))
    print(f"wrote {out} ({cpu:.1f} s of CPU in discover)")


def _close(a: Any, b: Any, rel: float) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= rel * max(abs(a), abs(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _ids(row: dict[str, Any]) -> list[Any]:
    return [[t[0] for t in row["tools"]], row["fused"], row["lexical"], row["dense"]]


def _largest(a: dict[str, Any], b: dict[str, Any]) -> float:
    pairs = [
        (x, y)
        for ta, tb in zip(a["tools"], b["tools"], strict=False)
        for x, y in zip(ta[1:4], tb[1:4], strict=True)
    ]
    pairs.append((a["conf"], b["conf"]))
    return max((abs(x - y) / max(abs(x), abs(y)) for x, y in pairs if x != y), default=0.0)


def compare(a_path: Path, b_path: Path, rel: float) -> int:
    a, b = json.loads(a_path.read_text()), json.loads(b_path.read_text())
    worst = 0
    for name in a:
        ra, rb = a[name], b.get(name, [])
        same = sum(x == y for x, y in zip(ra, rb, strict=False))
        order = sum(_ids(x) == _ids(y) for x, y in zip(ra, rb, strict=False))
        within = sum(all(_close(x[k], y[k], rel) for k in x) for x, y in zip(ra, rb, strict=False))
        diff = max((_largest(x, y) for x, y in zip(ra, rb, strict=False)), default=0.0)
        print(
            f"{name:11s} rows {len(ra)}: bit-identical {same}, same ids and order {order}, "
            f"within {rel:g} relative {within}; largest relative difference {diff:.2e}"
        )
        worst += (len(ra) != len(rb)) + (len(ra) - within)
    return 1 if worst else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out", type=Path)
    d.add_argument("--sets", type=Path, required=True, help="the indexed <set>.db files")
    d.add_argument("--bench", type=Path, default=ROOT.parent / "shared" / "bench")
    d.add_argument("--limit", type=int, default=100)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--rel", type=float, default=1e-12)
    args = ap.parse_args(argv)
    if args.cmd == "dump":
        dump(args.out, args.sets, args.bench, args.limit)
        return 0
    return compare(args.a, args.b, args.rel)


if __name__ == "__main__":
    raise SystemExit(main())
