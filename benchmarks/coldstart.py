"""Cold start: a NEW process opening a stored catalog and answering its first discovery.

    python benchmarks/coldstart.py [--size 100000] [--runs 3] [--db PATH] [--profile]
        [--compare OTHER/src] [--new-queries] [--timeline]

Builds (once, kept at ``--db``) the synthetic catalog of ``benchmarks/catalog_gen.py``
in a SQLite file, embedding through the same text -> vector cache file as
``benchmarks/scale.py``. Then, ``--runs`` times, starts a fresh Python process that
imports toolscout, opens the file (``Toolscout.open``) and asks one discovery as a
principal of one tenant holding every family's scopes, and reports from process start:
the time to the catalog being open, the first discovery's own time, and the total; the
second and third discoveries (other tenants) for comparison. ``--profile`` runs the
first discovery under cProfile and prints its top functions by cumulative time.

The 1-minute load average is recorded beside every run (the machine may be shared).
Writes ``benchmarks/results/coldstart.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

CHILD = r"""
import json, sys, time
t0 = float(sys.argv[1])
profile = sys.argv[3] == "1"
sys.path.insert(0, sys.argv[4])
if sys.argv[6] == "1":
    import timeline
    timeline.install(t0)
import catalog_gen
from toolscout import Settings, Toolscout
from toolscout.policy import Principal
scopes = [f"{family}:*" for family in catalog_gen.FAMILIES]
ts = Toolscout.open(Settings(db=sys.argv[2], log=False))
opened = time.time()
tenants = ["t0001", "t0002", "t0003"]
queries = ["list the open tickets", "refund the last invoice", "restart the staging server"]
run = int(sys.argv[5])
if run >= 0:  # --new-queries: requests no earlier process of this run asked
    more = ["close a support ticket", "send the invoice to the customer", "scale the cluster up",
            "reset a user's password", "export the sales report", "archive old log files",
            "book a meeting room", "rotate the api keys", "translate the product page"]
    queries = [(queries + more)[(3 * run + j) % (len(queries) + len(more))] for j in range(3)]
times = []
for i, (tenant, query) in enumerate(zip(tenants, queries)):
    who = Principal.of(f"cold{i}", tenant, scopes=scopes)
    start = time.time()
    if profile and i == 0:
        import cProfile, pstats
        prof = cProfile.Profile()
        prof.enable()
        ts.discover(who, query, k=5)
        prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(45)
    else:
        ts.discover(who, query, k=5)
    times.append(time.time() - start)
    if i == 0:
        first_cpu = time.process_time()  # the process's CPU (every thread) to the first answer
ts.close()
out = {"open_s": opened - t0, "first_s": times[0], "next_s": times[1:],
       "total_s": opened - t0 + times[0], "closed_s": time.time() - t0, "first_cpu_s": first_cpu}
if sys.argv[6] == "1":
    out["timeline"] = timeline.marks(t0, opened + sum(times[:2]))  # to the second answer
print(json.dumps(out))
"""


def specs_of(rows: list[dict[str, Any]]) -> list[Any]:
    """``make_spec`` of each row, validating each distinct tool once: tenants' copies
    differ only in id and tenants (checking a schema is ~25 ms on a loaded machine, so
    100k tools took most of an hour), and a sample is checked against ``make_spec``."""
    import dataclasses
    import random

    from toolscout.cards import make_spec

    made: dict[str, Any] = {}
    out = []
    for row in rows:
        key = json.dumps(
            {k: v for k, v in row.items() if k not in ("id", "tenants")}, sort_keys=True
        )
        first = made.get(key)
        if first is None:
            made[key] = first = make_spec(row)
            out.append(first)
            continue
        card = dataclasses.replace(first.card, id=row["id"], tenants=tuple(row["tenants"]))
        out.append(dataclasses.replace(first, card=card))
    for i in random.Random(3).sample(range(len(rows)), min(300, len(rows))):
        if out[i] != make_spec(rows[i]):
            raise SystemExit(f"the fast fixture differs from make_spec at {rows[i]['id']}")
    return out


def build(db: Path, size: int, cache: Path) -> None:
    import catalog_gen
    from scale import CachedEmbedder
    from toolscout import Settings, Toolscout

    specs = specs_of(catalog_gen.generate(size))
    embedder = CachedEmbedder(cache)
    embedder.building = True
    with Toolscout.open(Settings(db=str(db), log=False), embedder=embedder) as ts:
        ts.catalog.add(specs)
    embedder.save()


def print_timeline(title: str, marks: list[dict[str, Any]], least: float = 0.005) -> None:
    """One line a mark of at least ``least`` seconds: seconds from process start, thread,
    duration, name (nested marks are inside the ones before them that end later)."""
    shown = [m for m in marks if m["end"] - m["start"] >= least]
    print(f"{title}: timeline (s from process start; {len(marks) - len(shown)} marks"
          f" under {least * 1000:.0f} ms left out)")  # fmt: skip
    for m in shown:
        thread = "main" if m["thread"] == "MainThread" else m["thread"]
        print(f"  {m['start']:7.3f} -> {m['end']:7.3f}  {m['end'] - m['start']:6.3f}"
              f"  {thread:<20.20} {m['name']}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--db", type=Path, help="the catalog file (built when missing)")
    cache = Path(tempfile.gettempdir()) / "toolscout-scale-vectors.npz"
    ap.add_argument("--cache", type=Path, default=cache)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument(
        "--compare",
        type=Path,
        help="another toolscout source tree (its src): each run is then one process of it and"
        " one of this tree, alternately, on the same file",
    )
    ap.add_argument(
        "--new-queries",
        action="store_true",
        help="each run asks requests no earlier run asked (both trees the same ones): a"
        " process then cannot reuse what an earlier one derived for the same request",
    )
    ap.add_argument(
        "--timeline",
        action="store_true",
        help="record perf_counter marks around the steps of opening and of the first"
        " discovery, on every thread (benchmarks/timeline.py), and print them per run",
    )
    args = ap.parse_args()
    if args.runs < 1:
        raise SystemExit("error: --runs must be at least 1")
    db = args.db or Path(tempfile.gettempdir()) / f"toolscout-coldstart-{args.size}.db"
    if not db.exists():
        start = time.perf_counter()
        build(db, args.size, args.cache)
        print(f"built {db} ({args.size} tools) in {time.perf_counter() - start:.1f} s", flush=True)
    trees = [("this", str(ROOT / "src"))]
    if args.compare is not None:
        trees.insert(0, ("compare", str(args.compare.resolve())))
    runs: list[dict[str, Any]] = []
    for i in range(args.runs):
        for tree, src in trees:
            before = round(os.getloadavg()[0], 2)
            env = {**os.environ, "PYTHONPATH": src}
            t0 = time.time()
            profile = "1" if args.profile and i == 0 and tree == "this" else "0"
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, repr(t0), str(db), profile, str(ROOT / "benchmarks"),
                 str(i if args.new_queries else -1), "1" if args.timeline else "0"],
                capture_output=True, text=True, check=False, env=env,
            )  # fmt: skip
            if proc.returncode != 0:
                raise SystemExit(f"the cold process failed:\n{proc.stderr[-3000:]}")
            if profile == "1":
                print(proc.stderr[-12000:])
            out = json.loads(proc.stdout.strip().splitlines()[-1])
            if args.timeline:
                print_timeline(f"run {i + 1} ({tree})", out["timeline"])
            out["tree"] = tree
            out["load_avg_before"] = before
            out["load_avg_after"] = round(os.getloadavg()[0], 2)
            runs.append(out)
            print(
                f"run {i + 1} ({tree}): open {out['open_s']:.2f} s, first discovery"
                f" {out['first_s']:.2f} s, total {out['total_s']:.2f} s"
                f" (CPU {out.get('first_cpu_s', float('nan')):.2f} s; closed at"
                f" {out['closed_s']:.2f} s); next"
                f" {[round(x, 3) for x in out['next_s']]} s; load avg {before} ->"
                f" {out['load_avg_after']}",
                flush=True,
            )
    result = {"size": args.size, "store": "sqlite", "cpus": os.cpu_count(),
              "new_queries": args.new_queries, "runs": runs}  # fmt: skip
    path = ROOT / "benchmarks" / "results" / "coldstart.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
