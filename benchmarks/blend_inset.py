"""Which half of a refit costs a set in-set: the prior, or the blend (and the dedupe yield)?

The all-six fit of ``quality.py --fits-only`` changes the ranker prior, the blend (4 → 32),
the dedupe yield, the Platt step and the confidence model at once; measured in-set as a
whole (``quality_ship.py``'s refit arm) it loses restbench more than the rule allows. This
script scores each set's queries in-set (``quality_ship.scores``: ``Catalog.discover(k=10,
tier="progressive")``, as the shipped arm takes it) under arms that change one part at a time:

- ``shipped``: the set as ``quality.py --cache`` keeps it, ``SearchSettings()``;
- ``ship-32``: the shipped prior, the blend 32 (everything else shipped);
- ``ship-32-y``: that, and the fit's dedupe yield;
- ``fit-4``: the fit's prior (each set's copy calibrated again from it, as a
  ``calibrate.VERSION`` bump does to a stored catalog), the shipped blend, yield, Platt
  step and confidence model;
- ``fit-4-platt``: that, with the fit's Platt step and confidence model;
- ``fit``: the fit as a whole (``quality.held_settings`` + its confidence model: the
  refit arm of ``quality_ship.py``).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/blend_inset.py --fits
benchmarks/results/quality.json --cache SETS --work DIR [--sets restbench] [--arms ...]
[--json OUT]`` (``--cache``: the indexed sets, read only; ``--work``: where the calibrated
copies go).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality
import quality_ship

ARMS = ("shipped", "ship-32", "ship-32-y", "fit-4", "fit-4-platt", "fit")


def arm_settings(arm: str, fit: Mapping[str, Any]) -> tuple[Any, bool, bool]:
    """(settings, calibrated from the fit's prior?, the fit's confidence model?) of an arm."""
    from toolscout.settings import SearchSettings

    if arm == "shipped":
        return SearchSettings(), False, False
    if arm == "ship-32":
        return SearchSettings(ranker_blend=32.0), False, False
    if arm == "ship-32-y":
        return SearchSettings(ranker_blend=32.0, dedupe_yield=fit["dedupe_yield"]), False, False
    prior = tuple(fit["prior"])
    if arm == "fit-4":
        return SearchSettings(ranker_prior=prior, ranker_blend=4.0), True, False
    if arm == "fit-4-platt":
        platt = tuple(fit["platt"])
        return (
            SearchSettings(ranker_prior=prior, ranker_blend=4.0, confidence_platt=platt),
            True,
            True,
        )
    if arm == "fit":
        return quality.held_settings(fit), True, True
    raise SystemExit(f"error: unknown arm {arm!r}; expected one of {', '.join(ARMS)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fits", type=Path, required=True, help="a quality.py --fits-only JSON")
    parser.add_argument("--fit", default="all", help="which fit of --fits (default: all)")
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, required=True, help="the indexed sets (read only)")
    parser.add_argument("--work", type=Path, required=True, help="the calibrated copies")
    parser.add_argument("--sets", default="restbench", help="comma-separated set names")
    parser.add_argument("--arms", default=",".join(ARMS), help="comma-separated arms")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        fit = json.loads(args.fits.read_text(encoding="utf-8"))["fits"][args.fit]
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"error: {args.fits} holds no fit {args.fit!r} ({exc})") from exc
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    for a in arms:
        arm_settings(a, fit)  # an unknown arm is refused before anything runs
    wanted = {s.strip() for s in args.sets.split(",") if s.strip()}
    sets = [d for d in quality.bench_sets(args.bench) if d.name in wanted]
    if len(sets) != len(wanted):
        raise SystemExit(f"error: no such set under {args.bench}: {sorted(wanted)}")

    from toolscout.discovery.catalog import Catalog
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.fitting import mean

    embedder = MiniLMEmbedder()
    out: dict[str, Any] = {}
    for d in sets:
        out[d.name] = {}
        for arm in arms:
            settings, refit, own_confidence = arm_settings(arm, fit)
            cache = args.cache
            if refit:
                cache = args.work / "refit"
                db = quality_ship.refit_copy(args.cache, cache, d.name)
                with Catalog.open(db, embedder=embedder, log=False, settings=settings) as cat:
                    cat.calibrate()  # from the fit's prior

            def run(
                d: Path = d, cache: Path = cache, settings: Any = settings
            ) -> tuple[list[float], ...]:
                with quality.opened_set(d, cache, None, embedder) as (cat, queries):
                    return quality_ship.scores(cat, queries, settings)

            go: Callable[[], tuple[list[float], ...]] = run
            if own_confidence:
                with quality.confidence_model(fit["confidence"]):
                    got = go()
            else:
                got = go()
            out[d.name][arm] = {
                m: round(mean(v), 4) for m, v in zip(quality_ship.METRICS, got, strict=True)
            }
            print(d.name, arm, out[d.name][arm], flush=True)
    if args.json:
        argv_list = list(sys.argv[1:] if argv is None else argv)
        quality.write_results(
            args.json,
            quality.command_line("benchmarks/blend_inset.py", argv_list),
            fit=args.fit,
            sets=out,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
