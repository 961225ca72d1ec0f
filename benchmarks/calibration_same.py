"""Does this tree calibrate each indexed set as a base tree did, bit for bit? And does
``catalog_evidence`` measure what the base's calibration measured with its switches on?

A fit in another process moves the weights' last bits (the fit's sums are BLAS products
whose rounding follows memory alignment: the base refitting the same set twice in two
processes differs by ~1e-15), so the base and this tree are compared in ONE process: the
base's ``discovery/calibrate.py`` and ``ranker.py`` (``--base-src``, e.g. a
``git archive f2da421 src`` copy) are loaded from their files beside this tree's package
(every other module they import is this tree's, so the check holds only while those are
the same: ``git diff BASE -- src`` names which differ), and each set's catalog is calibrated
by the base's ``calibrate``, this tree's, and the base's again, each called by this tree's
``Retriever.calibrate`` (the product's own call: the catalog's retrievers and settings).
Printed per set: whether the three calibrations' weights, none bias, prior, pseudo recall
and orders are equal bit for bit; then the base's ``calibrate(measure_blends=True,
cross_fit=True)`` against
``catalog_evidence.measure`` (``blend_recall`` and the cross-fitted ``pseudo_recall``).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/calibration_same.py --base-src BASE/src
--cache SETS [--sets a,b]`` (``--cache``: a copy of the indexed sets: no calibration is
stored, but opening a catalog persists its derived state again). Exit 1 when anything differs.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

SETS = "apibench,bfcl,metatool,restbench,toolalpaca,toolbench"
SAME = ("weights", "none_bias", "prior", "prior_none", "pseudo_recall", "orders", "n_pseudo")


def _load(name: str, path: Path, source: str) -> ModuleType:
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(path))
    if spec is None:
        raise SystemExit(f"error: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def base_calibrate(base_src: Path) -> ModuleType:
    """The base tree's ``calibrate`` module, reading the base's ``ranker`` module (both
    loaded from ``base_src`` under other names; every other import is this tree's)."""
    d = base_src / "toolscout" / "discovery"
    if not (d / "calibrate.py").is_file() or not (d / "ranker.py").is_file():
        raise SystemExit(f"error: {base_src} holds no toolscout/discovery/calibrate.py, ranker.py")
    ranker_src = (d / "ranker.py").read_text(encoding="utf-8")
    _load("toolscout.discovery._base_ranker", d / "ranker.py", ranker_src)
    cal_src = (d / "calibrate.py").read_text(encoding="utf-8")
    cal_src = cal_src.replace(
        "from toolscout.discovery.ranker import (",
        "from toolscout.discovery._base_ranker import (",
    ).replace(
        "from toolscout.discovery import ranker as _ranker",
        "from toolscout.discovery import _base_ranker as _ranker",
    )
    return _load("toolscout.discovery._base_calibrate", d / "calibrate.py", cal_src)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-src", type=Path, required=True)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--sets", default=SETS)
    args = parser.parse_args(argv)
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    missing = [n for n in names if not (args.cache / f"{n}.db").is_file()]
    if missing:
        raise SystemExit(f"error: no indexed set {missing} in {args.cache}")

    from catalog_evidence import measure
    from toolscout.discovery import calibrate as new
    from toolscout.discovery import search
    from toolscout.discovery.catalog import Catalog
    from toolscout.embed.minilm import MiniLMEmbedder

    old = base_calibrate(args.base_src)
    embedder = MiniLMEmbedder()

    def run(cat: Any, fn: Any) -> Any:
        """``Retriever.calibrate`` (the product's own call) with ``fn`` as its ``calibrate``."""
        setattr(search, "calibrate", fn)  # noqa: B010 (the name the retriever calls)
        try:
            return cat.retriever(cat.settings).calibrate(cat.specs())
        finally:
            setattr(search, "calibrate", new.calibrate)  # noqa: B010

    bad = 0
    for name in names:
        with Catalog.open(args.cache / f"{name}.db", embedder=embedder, log=False) as cat:
            a, b, c = (
                json.loads(run(cat, f).to_json())
                for f in (old.calibrate, new.calibrate, old.calibrate)
            )
            same = {k: a.get(k) == b.get(k) == c.get(k) for k in SAME}
            on = run(cat, functools.partial(old.calibrate, measure_blends=True, cross_fit=True))
            got = measure(cat)
            evidence = {
                "blend_recall": on.blend_recall == got["blend_recall"],
                "cross-fitted pseudo_recall": on.pseudo_recall == got["pseudo_recall"],
            }
        ok = all(same.values()) and all(evidence.values())
        bad += not ok
        print(
            f"{name}: base / this tree / base bit-identical: "
            + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in same.items())
            + "; the moved evidence equals the base's: "
            + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in evidence.items())
            + f" ({on.blend_recall}; {on.pseudo_recall})",
            flush=True,
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
