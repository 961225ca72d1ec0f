"""Does a refit ship? Each set's queries through the product default, in-set, with the
shipped constants and with one fit's (``quality.py --fits-only --json FITS``, its "all"
row), and the rule applied.

The rule (issue 23): a constant changes only when the full-set leave-one-set-out fit
chooses it AND, measured on the full sets, no set loses more than :data:`MAX_LOSS` of
recall@5 or complete@5 against what ships (in-set, shipped constants against the new).

The two arms run on two copies of each indexed set, as a user's catalog would be:

- *shipped*: the sets as ``quality.py --cache`` keeps them (their calibrations fitted
  from the shipped prior), ``SearchSettings()`` and the shipped confidence model;
- *refit*: a copy of each set whose calibration is fitted again from the fit's prior and
  blend (what a ``calibrate.VERSION`` bump does to a stored catalog), the fit's
  constants as settings (``quality.held_settings``) and its confidence model.

Each query's recall@5 and complete@5 comes from ``Catalog.discover(k=10,
tier="progressive")``, as the harness's ``hybrid`` strategy takes it; the difference
per set is given with its 95% paired bootstrap interval (``fitting.paired_interval``).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/quality_ship.py --fits FITS --cache DIR
--refit-cache DIR2 [--stages DIR3] [--json OUT] [--into QUALITY_JSON]``; ``--into`` adds the
shipped arm's figures to a quality.py result as its in-set column (``in_set``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quality

#: the most a set may lose, recall@5 or complete@5, for a refit to ship
MAX_LOSS = 0.005
METRICS = ("recall@5", "complete@5")


def scores(catalog: Any, queries: Sequence[Any], settings: Any) -> tuple[list[float], ...]:
    """(recall@5, complete@5) of each query under ``settings`` (refused: nothing found), as
    ``harness.discover_and_score`` scores it."""
    from toolscout.evaluate.harness import discover_and_score, eval_principal

    principal = eval_principal(catalog)
    row: dict[str, list[float]] = {"recall": [], "complete": [], "confidence": [], "right": []}
    for q in queries:
        discover_and_score(catalog, settings, q.query, q.gold, principal, row)
    return row["recall"], row["complete"]


def compare(shipped: Sequence[Sequence[float]], refit: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Per metric: the shipped and refit means, and refit − shipped with its paired 95%
    interval."""
    from toolscout.evaluate.fitting import mean, paired_interval

    out: dict[str, Any] = {"n": len(shipped[0])}
    for metric, a, b in zip(METRICS, shipped, refit, strict=True):
        diff, low, high = paired_interval(b, a)
        out[metric] = {
            "shipped": round(mean(a), 4),
            "refit": round(mean(b), 4),
            "diff": [round(diff, 4), round(low, 4), round(high, 4)],
        }
    return out


def summary(got: Mapping[str, Any]) -> str:
    """One set's :func:`compare` as a line: each metric's before → after (difference [95%])."""
    return "; ".join(
        f"{m} {got[m]['shipped']:.3f} → {got[m]['refit']:.3f} "
        f"({got[m]['diff'][0]:+.3f} [{got[m]['diff'][1]:+.3f}, {got[m]['diff'][2]:+.3f}])"
        for m in METRICS
    )


def verdict(by_set: Mapping[str, Mapping[str, Any]], max_loss: float = MAX_LOSS) -> list[str]:
    """Each way the refit breaks the rule (empty: it ships): a set whose recall@5 or
    complete@5 falls by more than ``max_loss``."""
    return [
        f"{name} {metric} {got[metric]['diff'][0]:+.4f} (shipped {got[metric]['shipped']:.4f}, "
        f"refit {got[metric]['refit']:.4f})"
        for name, got in by_set.items()
        for metric in METRICS
        if got[metric]["diff"][0] < -max_loss
    ]


def against(
    shipped: Mapping[str, Sequence[Sequence[float]]],
    before: Mapping[str, Sequence[float]],
    max_loss: float = MAX_LOSS,
) -> tuple[dict[str, Any], list[str]]:
    """Each set's shipped arm (its queries' recall@5 and complete@5) against an older
    result's in-set figures (``before``: a quality.json's ``in_set`` sets, rounded to four
    places), and each way it breaks the rule, strictly: complete@5 is a share of whole
    requests, so the older figure is read as the whole count it rounds (1 of 199 requests
    is 0.005025, past 0.005, though it prints as 0.0050)."""
    from toolscout.evaluate.fitting import mean

    out: dict[str, Any] = {}
    broken: list[str] = []
    for name, arms in shipped.items():
        if name not in before:
            raise SystemExit(f"error: the older result has no in-set figures for {name}")
        n = len(arms[0])
        got: dict[str, Any] = {"n": n}
        for metric, values, old in zip(METRICS, arms, before[name], strict=True):
            new = mean(values)
            base = round(old * n) / n if metric == "complete@5" else old
            diff = new - base
            got[metric] = {"before": old, "now": round(new, 4), "diff": round(diff, 5)}
            if diff < -max_loss:
                broken.append(f"{name} {metric} {diff:+.5f} (before {old:.4f}, now {new:.4f})")
        out[name] = got
    return out, broken


def refit_copy(src: Path, dst: Path, name: str) -> Path:
    """A copy of a set's indexed catalog (``name.db`` and its dense files) under ``dst``."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.glob(f"{name}.db*"):
        if not (dst / f.name).exists():
            shutil.copy2(f, dst / f.name)
    return dst / f"{name}.db"


def run_set(
    d: Path, args: Any, fit: Mapping[str, Any], embedder: Any, stages: quality.Stages
) -> dict[str, Any]:
    from toolscout.discovery.catalog import Catalog
    from toolscout.settings import SearchSettings

    refit = quality.held_settings(fit)

    def shipped_arm() -> tuple[list[float], ...]:
        with quality.opened_set(d, args.cache, args.limit, embedder) as (cat, queries):
            return scores(cat, queries, SearchSettings())

    def refit_arm() -> tuple[list[float], ...]:
        db = refit_copy(args.cache, args.refit_cache, d.name)
        with Catalog.open(db, embedder=embedder, log=False, settings=refit) as cat:
            cat.calibrate()  # fitted again, from the fit's prior and blend
        with (
            quality.opened_set(d, args.refit_cache, args.limit, embedder) as (cat, queries),
            quality.confidence_model(fit["confidence"]),
        ):
            return scores(cat, queries, refit)

    a = stages.get("ship-shipped", d.name, quality.shipped(), shipped_arm)
    b = stages.get("ship-refit", d.name, fit, refit_arm)
    return compare(a, b)


def held_out_scores(
    d: Path, cache: Path, limit: int | None, fit: Mapping[str, Any], embedder: Any
) -> tuple[list[float], list[float]]:
    """(recall@5, complete@5) of each query of a set, held out: the default with the fit
    made without the set, at the blend and yield it chose (``fitting.recall_grid``, as
    ``quality.py``'s grid measures the held-out default)."""
    from toolscout.evaluate.fitting import recall_grid

    pair = (float(fit["blend"]), float(fit["dedupe_yield"]))
    complete: dict[Any, list[float]] = {}
    with quality.opened_set(d, cache, limit, embedder) as (cat, queries):
        got = recall_grid(
            cat, queries, quality.held_settings(fit), (pair[0],), (pair[1],), complete=complete
        )
    return got[pair], complete[pair]


def held_out_against(args: Any, embedder: Any, stages: quality.Stages) -> dict[str, Any]:
    """Each set held out with an older run's fits (``--held-out-against``) and with this
    run's (``--fits``): the refit against what the held-out table showed before."""
    old = json.loads(args.held_out_against.read_text(encoding="utf-8"))["fits"]
    new = json.loads(args.fits.read_text(encoding="utf-8"))["fits"]
    out: dict[str, Any] = {}
    for d in quality.bench_sets(args.bench):
        a, b = (
            stages.get(
                "held-out-scores",
                d.name,
                fits[d.name],
                lambda f=fits[d.name], d=d: held_out_scores(d, args.cache, args.limit, f, embedder),
            )
            for fits in (old, new)
        )
        out[d.name] = compare(a, b)
        print(f"{d.name} held out, before → refit: {summary(out[d.name])}", flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fits", type=Path, required=True, help="quality.py --fits-only JSON")
    parser.add_argument("--fit", default="all", help="which fit of --fits (default: all)")
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, required=True, help="the indexed sets")
    parser.add_argument("--refit-cache", type=Path, required=True, help="their refit copies")
    parser.add_argument("--stages", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--into", type=Path, default=None, help="a quality.py result")
    parser.add_argument(
        "--held-out-against",
        type=Path,
        default=None,
        help="an older quality.py result: compare each set held out with its fits and --fits'",
    )
    parser.add_argument(
        "--shipped-only",
        type=Path,
        default=None,
        metavar="QUALITY_JSON",
        help="run the shipped arm only (this tree's constants, each set's own calibration) "
        "and judge it against this older result's in-set figures (its in_set), strictly",
    )
    args = parser.parse_args(argv)
    try:
        fit = json.loads(args.fits.read_text(encoding="utf-8"))["fits"][args.fit]
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"error: {args.fits} holds no fit {args.fit!r} ({exc})") from exc

    from toolscout.embed.minilm import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    stages = quality.Stages(args.stages, args.limit)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    command = quality.command_line("benchmarks/quality_ship.py", argv_list)
    if args.held_out_against is not None:
        got = held_out_against(args, embedder, stages)
        if args.json:
            quality.write_results(args.json, command, held_out=got)
        return 0
    if args.shipped_only is not None:
        try:
            before = json.loads(args.shipped_only.read_text(encoding="utf-8"))["in_set"]["sets"]
        except (OSError, ValueError, KeyError) as exc:
            raise SystemExit(f"error: {args.shipped_only} holds no in-set figures ({exc})") from exc
        arms: dict[str, tuple[list[float], ...]] = {}
        for d in quality.bench_sets(args.bench):
            with quality.opened_set(d, args.cache, args.limit, embedder) as (cat, queries):
                from toolscout.settings import SearchSettings

                arms[d.name] = stages.get(
                    "ship-shipped", d.name, quality.shipped(),
                    lambda cat=cat, queries=queries: scores(cat, queries, SearchSettings()),
                )  # fmt: skip
            print(f"{d.name} in-set: " + ", ".join(
                f"{m} {sum(v) / len(v):.4f}" for m, v in zip(METRICS, arms[d.name], strict=True)
            ), flush=True)  # fmt: skip
        got, broken = against(arms, before)
        print("ships" if not broken else "does not ship: " + "; ".join(broken))
        if args.json:
            quality.write_results(args.json, command, sets=got, breaks=broken, max_loss=MAX_LOSS)
        if args.into:
            now = {n: [g[m]["now"] for m in METRICS] for n, g in got.items()}
            write_in_set(args.into, command, now, broken)
        return 0
    by_set: dict[str, Any] = {}
    for d in quality.bench_sets(args.bench):
        by_set[d.name] = run_set(d, args, fit, embedder, stages)
        print(f"{d.name}: {summary(by_set[d.name])}", flush=True)
    broken = verdict(by_set)
    print("ships" if not broken else "does not ship: " + "; ".join(broken))
    if args.json:
        quality.write_results(
            args.json, command, fit=fit, sets=by_set, breaks=broken, max_loss=MAX_LOSS
        )
    if args.into:
        shipped = {n: [g[m]["shipped"] for m in METRICS] for n, g in by_set.items()}
        write_in_set(args.into, command, shipped, broken)
    return 0


def write_in_set(
    into: Path, command: str, sets: dict[str, list[float]], broken: Sequence[str]
) -> None:
    """Write a result's in-set figures (each set's shipped arm) into a quality.json."""
    doc = json.loads(into.read_text(encoding="utf-8"))
    doc["in_set"] = {"command": command, "sets": sets, "breaks": list(broken), "max_loss": MAX_LOSS}
    into.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", "utf-8")


if __name__ == "__main__":
    sys.exit(main())
