"""Where the test suite's time goes: wall and CPU per test file, child processes included.

Two ways to measure, both printing a table (the most CPU first) and writing JSON:

- **one run** (the default): the suite (or the files named) as ``make test`` runs it, with
  ``--cpu-json`` (``tests/conftest.py``): each test's CPU (its process's and the processes
  it started and reaped: ``toolscout`` commands, servers, node, PostgreSQL), the CPU of
  the processes the fork servers forked for it (``tests/forkserver.py`` counts each one
  when it reaps it), its wall time and its worker, added up per file. The whole run's CPU
  is that of the pytest process and every process it reaped (``os.wait4``), so what no
  test was charged with (the workers' start and collection, the fork servers' imports,
  the session fixtures torn down last) is the difference.
- ``--alone``: each file in a pytest process of its own, one after another (wall and CPU
  of the whole process tree it reaped; no sharing between files, so a session fixture
  such as the demo catalog or the embedded PostgreSQL is paid once per file here).

    PYTHONPATH=src .venv/bin/python benchmarks/suite_cost.py [--out PATH] -- -n 2
    PYTHONPATH=src .venv/bin/python benchmarks/suite_cost.py --alone tests/test_cli.py ...

Writes ``benchmarks/results/suite_cost.json`` unless ``--out`` names another file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "suite_cost.json"
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]


def timed(cmd: Sequence[str]) -> dict[str, float]:
    """Run ``cmd`` from the repository root; its exit status, wall time and the CPU of its
    whole reaped process tree (user, system)."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(cmd), cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "status": proc.returncode,
        "wall": round(time.perf_counter() - start, 2),
        "user": round(usage.ru_utime, 2),
        "system": round(usage.ru_stime, 2),
    }


def per_file(tests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The tests' figures (``--cpu-json``) added up per file."""
    files: dict[str, dict[str, Any]] = {}
    for nodeid, t in tests.items():
        row = files.setdefault(
            nodeid.split("::", 1)[0],
            {"tests": 0, "wall": 0.0, "cpu": 0.0, "forked_cpu": 0.0, "processes": 0,
             "workers": set()},
        )  # fmt: skip
        row["tests"] += 1
        for key in ("wall", "cpu", "forked_cpu", "processes"):
            row[key] += t[key]
        row["workers"].add(t["worker"])
    for row in files.values():
        row["workers"] = sorted(row["workers"])
        row["total_cpu"] = round(row["cpu"] + row["forked_cpu"], 2)
        for key in ("wall", "cpu", "forked_cpu"):
            row[key] = round(row[key], 2)
    return dict(sorted(files.items(), key=lambda kv: -kv[1]["total_cpu"]))


def one_run(args: Sequence[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="suite-cost-") as tmp:
        out = Path(tmp) / "tests.json"
        run = timed([*PYTEST, "--cpu-json", str(out), *args])
        if not out.exists():
            raise SystemExit(f"suite_cost: pytest wrote no {out.name} (exit {run['status']})")
        data = json.loads(out.read_text())
    files = per_file(data["tests"])
    charged = sum(row["total_cpu"] for row in files.values())
    run["charged_cpu"] = round(charged, 2)
    run["uncharged_cpu"] = round(run["user"] + run["system"] - charged, 2)
    return {"mode": "one run", "args": list(args), "run": run, "files": files,
            "workers": data["workers"], "tests": data["tests"]}  # fmt: skip


def alone(paths: Sequence[str]) -> dict[str, Any]:
    files = {}
    for path in paths:
        files[path] = timed([*PYTEST, path])
        files[path]["total_cpu"] = round(files[path]["user"] + files[path]["system"], 2)
    files = dict(sorted(files.items(), key=lambda kv: -kv[1]["total_cpu"]))
    return {"mode": "alone", "files": files}


def table(result: dict[str, Any], top: int) -> list[str]:
    rows = list(result["files"].items())[: top or None]
    if result["mode"] == "alone":
        lines = ["   wall      CPU  exit  file"]
        lines += [f"{r['wall']:7.1f} {r['total_cpu']:8.1f} {r['status']:5d}  {p}" for p, r in rows]
        return lines
    lines = ["   wall      CPU   forked  tests  procs  file"]
    lines += [
        f"{r['wall']:7.1f} {r['total_cpu']:8.1f} {r['forked_cpu']:8.1f} {r['tests']:6d} "
        f"{r['processes']:6d}  {p}"
        for p, r in rows
    ]
    run = result["run"]
    lines.append(
        f"whole run: exit {run['status']}, {run['wall']:.1f} s wall, {run['user']:.1f} + "
        f"{run['system']:.1f} s CPU (user + system, reaped processes); charged to tests "
        f"{run['charged_cpu']:.1f} s, to none {run['uncharged_cpu']:.1f} s"
    )
    for name, w in sorted(result["workers"].items()):
        lines.append(
            f"{name}: {w['tests']} tests, {w['cpu']:.1f} s of CPU, from {w['first']:.0f} s "
            f"to {w['last']:.0f} s"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alone", action="store_true", help="each file in its own process")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--top", type=int, default=40, help="rows printed (0: all)")
    parser.add_argument("args", nargs="*", help="pytest's arguments; with --alone, files")
    ns = parser.parse_args(argv)
    if ns.alone:
        paths = ns.args or sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("tests/test_*.py"))
        result = alone(paths)
    else:
        result = one_run(ns.args)
    print("\n".join(table(result, ns.top)))
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
