"""The parts' BM25 beside the query encoder against after it, in one process, paired.

    PYTHONPATH=src python benchmarks/parts10_ab.py [--cache DIR] [--repeats 3]

bfcl's catalog as ``latency.py`` builds it (``--cache``: its directory), its 300 timed
requests after 20 of warm-up, of which those read in parts (discovery/parts.py). Each is
discovered (product default, k=5, the query-vector cache cleared) twice in a row: with its
parts' BM25 searched on the pool beside the encoder (discovery/beside.py, shipped) and with
them searched after it on the caller's thread, each part when it is ranked (the path before
h/parts10, given by searching no part beside it); which goes first alternates. Prints both
sides' wall and caller-thread CPU, and the paired differences (machine drift cancels).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from toolscout.discovery import search
from toolscout.discovery.beside import searched_beside
from toolscout.discovery.gates import step_on
from toolscout.discovery.parts import request_parts
from toolscout.discovery.pipeline import discover
from toolscout.discovery.search import clear_query_cache
from toolscout.policy import Principal
from toolscout.settings import SearchSettings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import latency  # noqa: E402  (its catalog and its queries)


def _after(encode: Callable[[], Any], lexical: Any, whole: Sequence[str] | None, parts: Any) -> Any:
    """The path before: only the whole request's search beside the encoder."""
    return searched_beside(encode, lexical, whole, [])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", type=Path, default=ROOT.parent / "shared" / "bench")
    ap.add_argument("--cache", type=Path, default=None, help="latency.py's --cache directory")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        where = args.cache or Path(tmp)
        cat = latency.open_bfcl(args.bench, where / "bfcl-latency.db", True)
        queries = latency.bfcl_queries(args.bench)
        warm, queries = queries[:20], queries[20:320]
        who = Principal.of("bench", scopes=["*"])
        for q in warm:
            discover(cat, q, who, k=5)
        always = SearchSettings(encoder_skip=False)
        parts = [q for q in queries if request_parts(q) and step_on("parts", q, always)]
        ways = {"beside": searched_beside, "after": _after}
        wall: dict[str, list[float]] = {w: [] for w in ways}
        cpu: dict[str, list[float]] = {w: [] for w in ways}
        for r in range(args.repeats):
            for i, q in enumerate(parts):
                for way in ("beside", "after") if (i + r) % 2 == 0 else ("after", "beside"):
                    search.searched_beside = ways[way]  # type: ignore[assignment]
                    clear_query_cache()
                    t, c = time.perf_counter(), time.thread_time()
                    discover(cat, q, who, k=5, settings=always)
                    wall[way].append(time.perf_counter() - t)
                    cpu[way].append(time.thread_time() - c)
        search.searched_beside = searched_beside
        cat.close()
    for way in ways:
        print(
            f"{way:7s} {len(wall[way])} discoveries: wall p50 "
            f"{statistics.median(wall[way]) * 1e3:.2f} ms, mean "
            f"{statistics.fmean(wall[way]) * 1e3:.2f}; caller-thread CPU p50 "
            f"{statistics.median(cpu[way]) * 1e3:.2f} ms, "
            f"mean {statistics.fmean(cpu[way]) * 1e3:.2f}"
        )
    d = [a - b for a, b in zip(wall["beside"], wall["after"], strict=True)]
    dc = [a - b for a, b in zip(cpu["beside"], cpu["after"], strict=True)]
    print(
        f"paired beside - after: wall median {statistics.median(d) * 1e3:+.2f} ms (mean "
        f"{statistics.fmean(d) * 1e3:+.2f}), beside faster in {sum(x < 0 for x in d)}/{len(d)}; "
        f"caller-thread CPU median {statistics.median(dc) * 1e3:+.2f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
