"""A bulk import into an empty PostgreSQL catalog: ``PostgresStore.upsert``'s wall time and
the CPU of the server that did the work, at each size.

Synthetic tools (no encoder: random unit vectors, one card text and one alias text a tool,
as an import of a catalog with generated aliases stores them) are upserted in one call
into a fresh database of a server started for the run (``tests/pg_fixture.py``: the
embedded PostgreSQL 18 + pgvector the tests use, ``fsync=off``). Each size is imported
``--repeat`` times, each into a database of its own. The server's CPU is that of its
postmaster and every backend it started (``/proc``: the live ones' own, the exited
ones' as the postmaster reaped them), read before the store opens and after it closes.

    PYTHONPATH=src .venv/bin/python benchmarks/pg_import.py --sizes 10000 100000

Run it against another tree's store with that tree's ``src`` first on ``PYTHONPATH``.
Writes ``benchmarks/results/pg_import.json`` unless ``--out`` names another file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "pg_import.json"
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def server_cpu(postmaster: int) -> float:
    """CPU seconds of the server: the postmaster's own and its reaped children's, and
    every live child's own."""
    f = _stat(postmaster)
    ticks = sum(int(x) for x in f[11:15])  # utime stime cutime cstime
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            g = _stat(int(entry))
        except OSError:
            continue
        if int(g[1]) == postmaster:  # ppid
            ticks += int(g[11]) + int(g[12])
    return ticks / TICK


def catalog(n: int, seed: int) -> tuple[list[Any], dict[str, Any]]:
    from support import spec
    from toolscout.stores.base import KIND_ALIAS, KIND_CARD, IndexedTool

    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((2 * n, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    tools = [
        IndexedTool(
            spec(f"bulk{i // 1000:03d}.tool_{i:06d}"),
            {"name": f"tool {i}", "summary": f"does thing {i % 997} to item {i % 101}"},
            [(KIND_CARD, f"c{i}"), (KIND_ALIAS, f"a{i}")],
        )
        for i in range(n)
    ]
    vectors = {f"c{i}": matrix[2 * i] for i in range(n)}
    vectors.update({f"a{i}": matrix[2 * i + 1] for i in range(n)})
    return tools, vectors


def one(server: Any, n: int, seed: int) -> dict[str, Any]:
    from toolscout.stores.postgres import PostgresStore

    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    tools, vectors = catalog(n, seed)
    dsn = server.new_database()
    cpu0 = server_cpu(postmaster)
    store = PostgresStore(dsn)
    start = time.perf_counter()
    client0 = time.process_time()
    stats = store.upsert(tools, vectors, model_id="bench")
    wall = time.perf_counter() - start
    client = time.process_time() - client0
    assert (stats.added, stats.embedded) == (n, 2 * n), stats
    store.close()
    time.sleep(0.5)  # the backends exit and are reaped
    return {
        "tools": n,
        "texts": 2 * n,
        "upsert_wall_s": round(wall, 2),
        "server_cpu_s": round(server_cpu(postmaster) - cpu0, 2),
        "client_cpu_s": round(client, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if any(n < 1 for n in args.sizes) or args.repeat < 1:
        parser.error("--sizes and --repeat must be positive")
    import toolscout
    from pg_fixture import PostgresServer

    server = PostgresServer()
    rows = []
    try:
        for n in args.sizes:
            for r in range(args.repeat):
                row = one(server, n, seed=r)
                rows.append(row)
                print(
                    f"{n:>8,} tools: upsert {row['upsert_wall_s']:7.2f} s wall,"
                    f" PostgreSQL {row['server_cpu_s']:7.2f} s CPU,"
                    f" client {row['client_cpu_s']:6.2f} s CPU",
                    flush=True,
                )
    finally:
        server.stop()
    result = {
        "store": str(Path(toolscout.__file__).resolve().parent),
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
