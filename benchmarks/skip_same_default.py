"""Does a change to the encoder skip or its confidence leave the default discovery alone?

    PYTHONPATH=src python benchmarks/skip_same_default.py --base BASE_SRC --cache DIR
        [--set bfcl] [--queries 400] [--bench DIR]

Runs the first ``--queries`` queries of a dev set through ``Catalog.discover(k=10,
tier="progressive")`` once with the product defaults and once with ``encoder_skip=True``,
in one process per source tree (``--base``: another checkout's ``src``, e.g. a ``git
archive`` of the base commit; this tree's ``src`` beside it), on copies of the indexed set
in ``--cache`` (as ``quality.py --cache`` leaves it), and compares the shortlists' ids and
confidences. Prints what differs and writes ``benchmarks/results/skip_same_default.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality  # noqa: E402


def run_here(db: Path, queries: Path, n: int) -> list[dict[str, Any]]:
    """Every query with the defaults, then with the skip on: ids, confidence, skip reason."""
    from toolscout.discovery.catalog import Catalog
    from toolscout.embed import default_embedder
    from toolscout.evaluate.evalset import read_queries
    from toolscout.evaluate.harness import eval_principal
    from toolscout.settings import SearchSettings

    out: list[dict[str, Any]] = []
    texts = [q.query for q in read_queries(queries)[:n]]
    with Catalog.open(db, embedder=default_embedder(), log=False) as cat:
        who = eval_principal(cat)
        for name, s in (
            ("default", SearchSettings()),
            ("skip_on", SearchSettings(encoder_skip=True)),
        ):
            for text in texts:
                got = cat.discover(text, who, k=10, settings=s, tier="progressive", record=False)
                out.append({"settings": name, "ids": list(got.ids),
                            "confidence": round(got.confidence, 6),
                            "skipped": got.trace.encoder_skipped})  # fmt: skip
    return out


def run_tree(src: Path, db: Path, queries: Path, n: int) -> list[dict[str, Any]]:
    """:func:`run_here` in a new process importing toolscout from ``src``."""
    with tempfile.TemporaryDirectory() as tmp:
        for f in db.parent.glob(db.name + "*"):  # the set's files, on a copy
            shutil.copy(f, Path(tmp) / f.name)
        code = (
            "import json, sys; sys.path.insert(0, sys.argv[1]); import skip_same_default as m; "
            "print(json.dumps(m.run_here(__import__('pathlib').Path(sys.argv[2]), "
            "__import__('pathlib').Path(sys.argv[3]), int(sys.argv[4]))))"
        )
        env = {**os.environ, "PYTHONPATH": str(src)}
        done = subprocess.run(
            [sys.executable, "-c", code, str(ROOT / "benchmarks"), str(Path(tmp) / db.name),
             str(queries), str(n)],
            env=env, check=True, capture_output=True, text=True,
        )  # fmt: skip
        rows: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
        return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="the other tree's src directory")
    ap.add_argument("--cache", type=Path, required=True, help="the indexed sets (SET.db)")
    ap.add_argument("--set", default="bfcl")
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "skip_same_default.json"
    )
    args = ap.parse_args(argv)
    db = args.cache / f"{args.set}.db"
    queries = args.bench / args.set / "queries.jsonl"
    for what, path in (("--base", args.base / "toolscout"), ("--cache", db), ("--set", queries)):
        if not path.exists():
            raise SystemExit(f"error: {what}: {path} does not exist")
    base = run_tree(args.base, db, queries, args.queries)
    here = run_tree(ROOT / "src", db, queries, args.queries)
    summary: dict[str, Any] = {}
    for name in ("default", "skip_on"):
        pairs = [
            (a, b) for a, b in zip(base, here, strict=True) if a["settings"] == name
        ]  # fmt: skip
        conf = [abs(a["confidence"] - b["confidence"]) for a, b in pairs]
        summary[name] = {
            "queries": len(pairs),
            "ids_differ": sum(a["ids"] != b["ids"] for a, b in pairs),
            "confidence_differs": sum(d > 0 for d in conf),
            "skipped": sum(bool(b["skipped"]) for _, b in pairs),
            "max_confidence_change": round(max(conf, default=0.0), 6),
        }
        print(f"{name}: {json.dumps(summary[name])}")
    shown = sys.argv[1:] if argv is None else argv
    quality.write_results(
        args.out,
        quality.command_line("benchmarks/skip_same_default.py", shown),
        set=args.set,
        **summary,
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
