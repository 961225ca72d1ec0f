"""The multilingual option's first carried-over request in new processes: the catalog's
word list (discovery/crosslingual.py) built and kept by the first, read by the next.

Copies a catalog indexed with multilingual-e5-small (``--db``: e.g. one that
``benchmarks/multilingual.py --cache DIR`` wrote, ``DIR/metatool.multilingual-e5-small.db``)
so the original is not touched, then starts ``--processes`` Python processes one after
another; each opens the copy, parses one request in another language and times
``crosslingual.bridged`` (the lexicon built or read, the request's words embedded and
carried over). Prints a table and writes JSON.

    PYTHONPATH=src .venv/bin/python benchmarks/lexicon_kept.py \
        --db DIR/metatool.multilingual-e5-small.db
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality import command_line, write_results  # noqa: E402

REQUEST = "Quel temps fera-t-il demain à Paris ?"

_ONE = """
import json, sys, time
from toolscout.discovery import crosslingual
from toolscout.discovery.catalog import Catalog
from toolscout.discovery.search import parse_query
with Catalog.open(sys.argv[1], log=False) as cat:
    df, n = cat.store.document_frequency()
    q = parse_query(sys.argv[2], df, n, cat.settings)
    start = time.perf_counter()
    got = crosslingual.bridged(cat.retriever(), q)
    took = time.perf_counter() - start
print(json.dumps({"seconds": round(took, 3), "carried": list(got.terms)}))
"""


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, required=True, help="a catalog indexed with e5")
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--request", default=REQUEST)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/lexicon_kept.json")
    args = ap.parse_args(args_in)
    if not args.db.is_file():
        ap.error(f"--db {args.db}: no such catalog file")
    if args.processes < 1:
        ap.error(f"--processes must be at least 1, got {args.processes}")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / args.db.name
        shutil.copyfile(args.db, db)
        for i in range(args.processes):
            out = subprocess.run(
                [sys.executable, "-c", _ONE, str(db), args.request],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            rows.append({"process": i + 1, **json.loads(out.stdout.strip().splitlines()[-1])})
    print(f"{'process':>8}  {'bridge s':>9}  carried")
    for r in rows:
        print(f"{r['process']:>8}  {r['seconds']:>9.3f}  {' '.join(r['carried'])}")
    write_results(
        args.out,
        command_line("benchmarks/lexicon_kept.py", args_in),
        request=args.request,
        loadavg=list(os.getloadavg()),
        rows=rows,
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
