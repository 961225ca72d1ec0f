"""What a call linked to its discovery costs in the service: ``Toolscout.aexecute`` with the
discovery id the MCP gateway passes for a tool it shortlisted (``mcp/tools.py``).

One process, the real default model and a SQLite catalog with its discovery log; one
discovery, then ``--calls`` dry-run calls each linked to it, and as many unlinked, in turn.
Prints a table (CPU and wall per call, the log's reads) and writes JSON. Run it once with
``PYTHONPATH=src`` and once with another tree's ``src`` to compare.

    PYTHONPATH=src .venv/bin/python benchmarks/linked_calls.py --calls 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from toolscout import DryRunExecutor, Principal, Settings, Toolscout
from toolscout.cards import make_spec
from toolscout.embed.minilm import MiniLMEmbedder
from toolscout.gateway.limits import Limits

TOOLS = [
    ("shop.track_parcel", "Track a parcel by its tracking number."),
    ("shop.refund_order", "Refund an order to the card it was paid with."),
    ("shop.search_orders", "Search orders by date range or customer email."),
]


async def _calls(ts: Any, who: Principal, n: int, did: str | None) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        result = await ts.aexecute(who, "shop.track_parcel", {}, discovery_id=did)
        assert result.ok, result.to_dict()
    return (time.process_time() - cpu) / n * 1000, (time.perf_counter() - wall) / n * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3, help="linked and unlinked runs, in turn")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/linked_calls.json"))
    args = ap.parse_args()
    who = Principal.of("alice", tenant="acme", scopes=["*"])
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(db=Path(tmp) / "c.db")
        embedder = MiniLMEmbedder(spin_wait=False)
        opened = Toolscout.open(
            settings,
            embedder=embedder,
            executors=DryRunExecutor(),
            limits=Limits(rate_per_second=0),
        )
        with opened as ts:
            ts.add([make_spec({"id": i, "summary": s}) for i, s in TOOLS])
            did = ts.discover(who, "where is my parcel").discovery_id
            log = ts.catalog.log
            reads = 0
            real = log.owner

            def owner(discovery_id: str) -> Any:
                nonlocal reads
                reads += 1
                return real(discovery_id)

            log.owner = owner  # type: ignore[method-assign]  # counts the log's reads
            asyncio.run(_calls(ts, who, 200, did))  # warm-up
            for r in range(args.rounds):
                for linked in (True, False):
                    reads = 0
                    cpu, wall = asyncio.run(_calls(ts, who, args.calls, did if linked else None))
                    rows.append({"round": r + 1, "linked": linked, "cpu_ms": round(cpu, 4),
                                 "wall_ms": round(wall, 4), "log_reads": reads})  # fmt: skip
    print("| round | call | CPU ms a call | wall ms a call | log reads |")
    print("|---|---|---|---|---|")
    for row in rows:
        kind = "linked" if row["linked"] else "unlinked"
        print(f"| {row['round']} | {kind} | {row['cpu_ms']:.3f} | {row['wall_ms']:.3f} "
              f"| {row['log_reads']} |")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"calls": args.calls, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
