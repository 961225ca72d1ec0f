"""CPU outside the encoder of one bfcl discovery, this tree's functions against another's, paired.

    PYTHONPATH=src python benchmarks/paired_cpu.py --base /tmp/base/src \\
        --swap toolscout.discovery.pipeline:top_k \\
        --swap toolscout.stores.sqlite_dense:_DenseIndex._add_also [--queries 300] [--reps 4]

Whole-process A/B runs of ``latency.py`` on a shared 2-core machine move by more than a
tenth of a millisecond between runs of one tree, so a change of that size outside the
encoder cannot be seen in them. This script puts both versions in one process: it loads
each ``--swap`` target's module from ``--base`` (another tree's ``src``) under another
name, and for every one of ``--queries`` bfcl requests (latency.py's catalog and seeded
order, the first 20 only warming up) times ``pipeline.discover`` (k=5, the product
defaults, the encoder always read: ``encoder_skip=False``) ``--reps`` times with this
tree's functions and ``--reps`` times with the base's, alternating which goes first,
keeping each version's least thread CPU per request. Every request's query vector is in
the cache before timing starts, so the encoder never runs: what is timed is everything
else a discovery does (BM25, the dense search, the ranker, selection, rendering). A
target is ``module:attr`` or ``module:Class.attr``; ``module:attr@other`` takes the base's
value from module ``other`` (a name one module imported from another).

Prints the medians and means of both and of the paired differences (base − this tree,
ms), and writes them as JSON (``--out``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def _base_module(base: Path, name: str, held: dict[str, ModuleType]) -> ModuleType:
    """Module ``name`` as the ``base`` tree has it, under another name (its own imports
    resolve to this tree's modules: only the swapped values differ)."""
    if name not in held:
        path = base / (name.replace(".", "/") + ".py")
        if not path.is_file():
            raise SystemExit(f"--base has no module {name} (looked for {path})")
        spec = importlib.util.spec_from_file_location("base_" + name.replace(".", "_"), path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
        held[name] = module
    return held[name]


def swaps(base: Path, targets: list[str]) -> list[tuple[Any, str, Any, Any]]:
    """(owner, attribute, this tree's value, the base's value) for each target."""
    held: dict[str, ModuleType] = {}
    out = []
    for target in targets:
        spec, _, source = target.partition("@")
        module_name, sep, attr = spec.partition(":")
        if not sep or not attr:
            raise SystemExit(f"--swap {target!r}: expected module:attr or module:Class.attr")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise SystemExit(f"--swap {target!r}: cannot import {module_name}: {exc}") from exc
        old = _base_module(base, source or module_name, held)
        *path, name = attr.split(".")
        owner_new, owner_old = module, old
        for part in path:
            if not hasattr(owner_new, part) or not hasattr(owner_old, part):
                raise SystemExit(f"--swap {target!r}: {part} is not in both trees")
            owner_new, owner_old = getattr(owner_new, part), getattr(owner_old, part)
        if name not in vars(owner_new) or name not in vars(owner_old):
            raise SystemExit(f"--swap {target!r}: {attr} is not in both trees")
        out.append((owner_new, name, vars(owner_new)[name], vars(owner_old)[name]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, required=True, help="the other tree's src")
    ap.add_argument("--swap", action="append", required=True, help="module:attr (repeatable)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--bench", type=Path, default=ROOT.parent / "shared" / "bench")
    ap.add_argument("--cache", type=Path, default=None, help="keep the indexed bfcl here")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.queries < 1 or args.reps < 1:
        ap.error(f"--queries and --reps must be at least 1, got {args.queries}, {args.reps}")
    import latency
    from toolscout.discovery import pipeline
    from toolscout.policy import Principal
    from toolscout.settings import SearchSettings

    pairs = swaps(args.base, args.swap)

    def use(which: str) -> None:
        for owner, name, new, old in pairs:
            setattr(owner, name, new if which == "tree" else old)

    with tempfile.TemporaryDirectory() as tmp:
        db = (args.cache or Path(tmp)) / "bfcl-latency.db"
        cat = latency.open_bfcl(args.bench, db, True)
        who = Principal.of("bench", scopes=["*"])
        settings = SearchSettings(encoder_skip=False)
        queries = latency.bfcl_queries(args.bench)[: 20 + args.queries]
        for which in ("base", "tree"):  # every query vector cached, both versions warm
            use(which)
            for q in queries:
                pipeline.discover(cat, q, who, k=5, settings=settings)
        best: dict[str, list[float]] = {"base": [], "tree": []}
        for i, q in enumerate(queries[20:]):
            got: dict[str, list[float]] = {"base": [], "tree": []}
            for r in range(args.reps):
                for which in ("base", "tree") if (i + r) % 2 else ("tree", "base"):
                    use(which)
                    start = time.thread_time()
                    pipeline.discover(cat, q, who, k=5, settings=settings)
                    got[which].append(time.thread_time() - start)
            for which, times in got.items():
                best[which].append(min(times) * 1000)
        use("tree")
        cat.close()
    diff = [b - t for b, t in zip(best["base"], best["tree"], strict=True)]
    rows = {
        "base": best["base"],
        "this tree": best["tree"],
        "base - this tree": diff,
    }
    print(f"{'thread CPU a discovery, ms':28s} {'median':>8s} {'mean':>8s}")
    result: dict[str, Any] = {}
    for name, xs in rows.items():
        med, mean = statistics.median(xs), statistics.fmean(xs)
        result[name] = {"median": round(med, 4), "mean": round(mean, 4)}
        print(f"{name:28s} {med:8.3f} {mean:8.3f}")
    result["queries"], result["reps"] = args.queries, args.reps
    result["swapped"], result["load_avg"] = args.swap, list(os.getloadavg())
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
