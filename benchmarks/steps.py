"""The steps around the learned ranker, one switched off at a time, on the full dev sets,
held out; and gates on the request's shape chosen leave-one-set-out from the same rows.

Every query of every set (no ``--limit``: the full sets) goes through the product's own
path (``harness.discover_once``) with the constants ``benchmarks/quality.py`` fitted
without the set (``--fits``), as the default and with one step off: the merge of the parts
of a long request (``parts``), reformulation, the exact-hit guarantee, the prerequisite
step and the dedupe; and the parts (``bm25``, ``dense``, ``hybrid-fixed``). Queries run in
the outer loop so each is encoded once for every variant. Per query it keeps recall@5,
complete@5, the shortlist's confidence, whether its first tool was right, and the
request's shape (:func:`shape`): distinct content terms, characters, sentences, the parts
``discovery/parts.py`` reads it in, the exact mentions, and the distinct services (tool
groups) and tools the request names.

``--report`` (no catalog opened) prints:

1. the ablation: each variant's recall@5 / complete@5 per set, and each step's effect
   (default − step off) with a 95% paired bootstrap interval (``fitting.paired_interval``);
2. the gates: for a step that loses somewhere, "the step only where the request's shape
   is on one side of a threshold" (the default's row where on, the step-off row where
   off: a gate on one step per request is exactly that mixture). The gate (feature,
   threshold, side, or none) is chosen leave-one-set-out: on the other five sets, the
   largest *worst* margin over the best part, recall@5 and complete@5 both (the smaller
   of the two), then the largest mean, then no gate on a tie; and the held-out figure of
   each set with the gate chosen without it, against the default, with its interval and
   the ECE of the confidence shown.

Run: ``PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/steps.py --cache DIR
[--sets toolbench,bfcl]`` (appends to ``--json``), then ``... --report``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality import (  # noqa: E402
    DEFAULT_BENCH,
    bench_sets,
    command_line,
    confidence_model,
    held_settings,
    opened_set,
)

PARTS: tuple[str, ...] = ("bm25", "dense", "hybrid-fixed")
DEFAULT = "default"
#: one step off at a time (SearchSettings fields)
STEPS_OFF: dict[str, dict[str, Any]] = {
    "no parts": {"parts": False},
    "no reformulation": {"reformulate": False},
    "no exact hits": {"exact_hits": False},
    "no prerequisites": {"prerequisites": False},
    "no dedupe": {"dedupe": False},
}
#: the request's shape, per query (see :func:`shape`)
FEATURES: tuple[str, ...] = (
    "terms", "chars", "sentences", "parts", "exact", "services", "tools_named",
)  # fmt: skip
#: thresholds tried per feature (a gate: the step on where feature >= t, or where < t)
THRESHOLDS: dict[str, tuple[float, ...]] = {
    "terms": (4, 6, 8, 10, 12, 16, 20, 24, 30),
    "chars": (40, 60, 80, 120, 160, 200, 300),
    "sentences": (2, 3, 4),
    "parts": (2, 3, 4),
    "exact": (1, 2),
    "services": (1, 2, 3),
    "tools_named": (1, 2, 3),
}


def group_terms(specs: Sequence[Any]) -> dict[str, frozenset[str]]:
    """Each tool group's content terms (a service's name: ToolBench's RapidAPI tool)."""
    from toolscout.discovery.lexical import terms

    out: dict[str, frozenset[str]] = {}
    for s in specs:
        g = s.card.group
        if g and g not in out:
            got = frozenset(terms(g))
            if got:
                out[g] = got
    return out


def name_terms(specs: Sequence[Any]) -> dict[str, frozenset[str]]:
    """Each tool's name terms (the tool a request names by its words)."""
    from toolscout.discovery.lexical import terms

    return {s.card.id: frozenset(terms(s.card.name)) for s in specs}


def shape(
    text: str,
    groups: Mapping[str, frozenset[str]],
    names: Mapping[str, frozenset[str]],
    exact: int,
) -> dict[str, float]:
    """The request's shape: what a gate may read of it (``gates.request_shape``), and what
    a gate could read of it with the catalog's help (no gold, no evaluation data)."""
    from toolscout.discovery.gates import request_shape
    from toolscout.discovery.lexical import terms

    q = set(terms(text))
    return {
        **request_shape(text),
        "exact": float(exact),
        # a service is named when every term of its name is in the request
        "services": float(sum(1 for g in groups.values() if g <= q)),
        # a tool is named when its name has two terms or more, all in the request
        "tools_named": float(sum(1 for n in names.values() if len(n) >= 2 and n <= q)),
    }


def run_set(
    d: Path, workdir: Path, fit: Mapping[str, Any], embedder: Any, limit: int | None = None
) -> dict[str, Any]:
    """Per-query rows of every part and every variant on one full set, and the shapes."""
    from toolscout.discovery import pipeline
    from toolscout.evaluate.harness import STRATEGIES, discover_and_score, eval_principal

    held = held_settings(fit)
    strategies: dict[str, Any] = {DEFAULT: held}
    strategies.update({name: held.but(**c) for name, c in STEPS_OFF.items()})
    strategies.update({p: STRATEGIES[p] for p in PARTS})
    rows: dict[str, dict[str, list[float]]] = {
        name: {"recall": [], "complete": [], "confidence": [], "right": []} for name in strategies
    }
    shapes: dict[str, list[float]] = {f: [] for f in FEATURES}
    spent: dict[str, float] = {}
    start = time.perf_counter()
    with (
        confidence_model(fit["confidence"]),
        opened_set(d, workdir, limit, embedder, index=True) as (cat, scored),
    ):
        principal = eval_principal(cat)
        specs = cat.specs()
        groups, names = group_terms(specs), name_terms(specs)
        ent = pipeline.entitle(cat, principal)
        evidence = dict(cat.calibrate(0).pseudo_recall)
        for n, q in enumerate(scored):
            exact = len(cat.phrases().find(q.query, ent.ids))
            for f, v in shape(q.query, groups, names, exact).items():
                shapes[f].append(v)
            for name, settings in strategies.items():
                out = discover_and_score(cat, settings, q.query, q.gold, principal, rows[name])
                spent[name] = spent.get(name, 0.0) + out.ms
            if (n + 1) % 200 == 0:
                print(f"{d.name}: {n + 1}/{len(scored)} {time.perf_counter() - start:.0f}s",
                      flush=True)  # fmt: skip
    return {
        "queries": len(scored),
        "seconds": round(time.perf_counter() - start),
        "ms": {k: round(v) for k, v in spent.items()},
        "evidence": evidence,
        "shapes": shapes,
        "rows": rows,
    }


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / max(len(xs), 1)


def best_part(data: Mapping[str, Any], metric: str) -> tuple[str, float]:
    return max(((p, mean(data["rows"][p][metric])) for p in PARTS), key=lambda t: t[1])


#: a gate: (feature, threshold, side); side "ge": the step on where feature >= threshold,
#: "lt": on where feature < threshold; None: the step always on (the default)
Gate = tuple[str, float, str] | None


#: the step off for every request
NEVER: Gate = ("never", 0.0, "ge")


def gate_label(step: str, gate: Gate) -> str:
    if gate is None:
        return "always (default)"
    if gate == NEVER:
        return "never"
    f, t, side = gate
    return f"{step.removeprefix('no ')} where {f} {'>=' if side == 'ge' else '<'} {t:g}"


def gated(data: Mapping[str, Any], step: str, gate: Gate, key: str) -> list[float]:
    """The per-query rows of "the step only where the gate is on" (one step per request:
    the default's row where on, the step-off row where off)."""
    on = data["rows"][DEFAULT][key]
    if gate is None:
        return list(on)
    off = data["rows"][step][key]
    if gate == NEVER:
        return list(off)
    f, t, side = gate
    vals = data["shapes"][f]
    return [a if ((v >= t) == (side == "ge")) else b for a, b, v in zip(on, off, vals, strict=True)]


#: the features the gates may read (``--product-only``: only those the product computes,
#: ``gates.FEATURES``; the others need the catalog's help and are here to measure)
GATE_FEATURES: list[str] = list(FEATURES)


def gates() -> list[Gate]:
    out: list[Gate] = [None, NEVER]
    for f in GATE_FEATURES:
        for t in THRESHOLDS[f]:
            out += [(f, float(t), "ge"), (f, float(t), "lt")]
    return out


def margins(sets: Mapping[str, Any], names: Sequence[str], pick: Callable[[Any, str], list[float]]
            ) -> list[float]:  # fmt: skip
    """Per set, the smaller of the recall@5 and complete@5 margins over the best part."""
    return [
        min(mean(pick(sets[s], m)) - best_part(sets[s], m)[1] for m in ("recall", "complete"))
        for s in names
    ]


def choose_gate(sets: Mapping[str, Any], names: Sequence[str], step: str) -> Gate:
    """The gate with the largest worst margin over the best part on ``names`` (recall and
    complete@5), then the largest mean; no gate on a tie."""

    def key(g: Gate) -> tuple[float, float, int]:
        got = margins(sets, names, lambda d, m: gated(d, step, g, m))
        return (round(min(got), 6), round(mean(got), 6), int(g is None))

    return max(gates(), key=key)


def ece(confidence: Sequence[float], right: Sequence[float]) -> float:
    from toolscout.evaluate.metrics import reliability

    pairs = [(c, bool(r)) for c, r in zip(confidence, right, strict=True) if c >= 0]
    return float(reliability(pairs)["ece"]) if pairs else math.nan


def ablation(sets: Mapping[str, Any]) -> list[str]:
    from toolscout.evaluate.fitting import paired_interval

    names = sorted(sets)
    variants = [DEFAULT, *STEPS_OFF, *PARTS]
    out = ["| set | queries | " + " | ".join(variants) + " |", "|" + "---|" * (len(variants) + 2)]
    for s in names:
        rows = sets[s]["rows"]
        out.append(
            f"| {s} | {sets[s]['queries']} | "
            + " | ".join(
                f"{mean(rows[v]['recall']):.3f} / {mean(rows[v]['complete']):.3f}" for v in variants
            )
            + " |"
        )
    out += ["", "each step's effect held out (default − step off), recall@5 [95% CI] / complete@5:",
            "", "| set | " + " | ".join(s.removeprefix("no ") for s in STEPS_OFF) + " |",
            "|" + "---|" * (len(STEPS_OFF) + 1)]  # fmt: skip
    for s in names:
        rows = sets[s]["rows"]
        cells = []
        for step in STEPS_OFF:
            r = paired_interval(rows[DEFAULT]["recall"], rows[step]["recall"])
            c = mean(rows[DEFAULT]["complete"]) - mean(rows[step]["complete"])
            cells.append(f"{r[0]:+.3f} [{r[1]:+.3f}, {r[2]:+.3f}] / {c:+.3f}")
        out.append(f"| {s} | " + " | ".join(cells) + " |")
    return out


def gate_report(sets: Mapping[str, Any]) -> list[str]:
    from toolscout.evaluate.fitting import paired_interval

    names = sorted(sets)
    out: list[str] = []
    for step in STEPS_OFF:
        out += ["", f"### {step.removeprefix('no ')}: the gate chosen without each set", "",
                "| set | gate chosen without the set | default | gated, held out | "
                "gated − default, recall@5 [95% CI] | complete@5 | gated − best part "
                "(recall / complete) | ECE default | ECE gated |",
                "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for s in names:
            d = sets[s]
            g = choose_gate(sets, [o for o in names if o != s], step)
            r, c = gated(d, step, g, "recall"), gated(d, step, g, "complete")
            r0, c0 = d["rows"][DEFAULT]["recall"], d["rows"][DEFAULT]["complete"]
            diff = paired_interval(r, r0)
            over = (mean(r) - best_part(d, "recall")[1], mean(c) - best_part(d, "complete")[1])
            e0 = ece(d["rows"][DEFAULT]["confidence"], d["rows"][DEFAULT]["right"])
            e1 = ece(gated(d, step, g, "confidence"), gated(d, step, g, "right"))
            out.append(
                f"| {s} | {gate_label(step, g)} | {mean(r0):.3f} / {mean(c0):.3f} | "
                f"{mean(r):.3f} / {mean(c):.3f} | {diff[0]:+.3f} [{diff[1]:+.3f}, "
                f"{diff[2]:+.3f}] | {mean(c) - mean(c0):+.3f} | {over[0]:+.3f} / {over[1]:+.3f}"
                f" | {e0:.3f} | {e1:.3f} |"
            )
        out += ["", f"chosen on all {len(names)} sets: "
                + gate_label(step, choose_gate(sets, names, step))]  # fmt: skip
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, help="the indexed sets (quality.py --cache)")
    parser.add_argument("--fits", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument("--sets", default="", help="comma-separated set names (default: all)")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/steps.json")
    parser.add_argument("--limit", type=int, default=None, help="a seeded sample (smoke)")
    parser.add_argument("--report", action="store_true", help="only the tables, from --json")
    parser.add_argument(
        "--product-only", action="store_true", help="gates on what the product computes only"
    )
    args = parser.parse_args(args_list)
    if args.product_only:
        from toolscout.discovery.gates import FEATURES as PRODUCT

        GATE_FEATURES[:] = list(PRODUCT)

    doc: dict[str, Any] = {"commands": [], "sets": {}}
    if args.json.exists():
        doc = json.loads(args.json.read_text(encoding="utf-8"))
    if args.report:
        print("\n".join(ablation(doc["sets"]) + gate_report(doc["sets"])))
        return 0
    if args.cache is None:
        parser.error("--cache is required to run the sets")

    from toolscout.embed.minilm import MiniLMEmbedder

    fits = json.loads(args.fits.read_text(encoding="utf-8"))["fits"]
    wanted = [s for s in args.sets.split(",") if s]
    embedder = MiniLMEmbedder()
    sets = {d.name: d for d in bench_sets(args.bench)}
    for name in wanted or list(sets):
        doc["sets"][name] = run_set(sets[name], args.cache, fits[name], embedder, args.limit)
        doc["commands"].append(command_line("benchmarks/steps.py", args_list))
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc) + "\n", encoding="utf-8")
        print(f"## {name}: {doc['sets'][name]['seconds']}s", flush=True)
    print("\n".join(ablation(doc["sets"]) + gate_report(doc["sets"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
