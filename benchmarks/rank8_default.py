"""The order's own weights (``ranker.ORDER_PRIOR``), held out on the full sets, in the product.

Step ``fit`` (numpy only, from the raw pools of ``benchmarks/rank8_pools.py --limit 0``):
for each dev set, the order's prior fitted on the other five sets' queries exactly as
``fitting.fit_prior`` fits the ranker prior (the same balanced sample, L2 and steps), with
the fixed fusion times that set's held-out blend as a fixed offset (``logit.fit(offset=)``);
and the fit on all six (what ships).

Step ``run``: every query of every set through the product's own path
(``harness.discover_once``) with the constants ``benchmarks/quality.py`` fitted without the
set (``--fits``: prior, Platt step, blend, dedupe yield, lead margin, confidence model), the
default as it was (``ranker_order_prior=()``) and with the order prior fitted without the
set, and the three parts; queries in the outer loop so each is encoded once. Per query:
recall@5, complete@5, the confidence shown and whether the first tool was right.

``--report`` prints each set's figures, the change with its 95% paired bootstrap interval
(``fitting.paired_interval``) and the ECE of the held-out confidence.

Run::

    PYTHONPATH=src .venv/bin/python benchmarks/rank8_default.py fit --cache DIR --out FITS
    PYTHONPATH=src .venv/bin/python benchmarks/rank8_default.py run --cache DIR \\
        --fits-order FITS --json OUT [--sets a,b] [--mixes 0.25,0.5,0.75]
    PYTHONPATH=src .venv/bin/python benchmarks/rank8_default.py report --json OUT
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from quality import DEFAULT_BENCH, bench_sets, confidence_model, held_settings, opened_set  # noqa: E402

SETS = ("apibench", "bfcl", "metatool", "restbench", "toolalpaca", "toolbench")
PARTS = ("bm25", "dense", "hybrid-fixed")
BEFORE, AFTER = "default before", "default after"


def examples_by_set(cache: Path) -> dict[str, list[Any]]:
    """Every query's pool features and gold rows, per set (as ``fitting.examples``)."""
    from toolscout.discovery.features import FieldTerms, features
    from toolscout.discovery.logit import Example
    from toolscout.stores.base import Hits

    out: dict[str, list[Any]] = {}
    for name in SETS:
        data = pickle.loads((cache / f"{name}.rank8-0.pkl").read_bytes())
        fields = FieldTerms(data["name"], data["summary"], {}, data["in_name"], data["in_summary"])
        idfs = data["idf"]

        def idf(t: str, idfs: Mapping[str, float] = idfs) -> float:
            return idfs.get(t, idfs["\x00"])

        got: list[Any] = []
        for row in data["rows"]:
            lex = Hits(list(row["lex"][0]), list(row["lex"][1]))
            dense = Hits(list(row["dense"][0]), list(row["dense"][1]))
            ids, x = features(row["qterms"], lex, dense, fields, idf)
            targets = [ids.index(g) for g in row["gold"] if g in ids] or [-1]
            got += [Example(x, t) for t in targets]
        out[name] = got
    return out


def fit_orders(cache: Path, fits: Mapping[str, Any]) -> dict[str, list[float]]:
    """The order's prior fitted without each set (at its held-out blend) and on all six."""
    from toolscout.discovery.logit import fit
    from toolscout.discovery.ranker import FIXED_MIX
    from toolscout.evaluate.fitting import _balanced

    by_set = examples_by_set(cache)
    out: dict[str, list[float]] = {}
    for held in [*SETS, None]:
        blend = float(fits[held or "all"]["blend"])
        w, _ = fit(_balanced(by_set, held), l2=1e-3, steps=400,
                   offset=tuple(blend * m for m in FIXED_MIX))  # fmt: skip
        out[held or "all"] = [round(v, 4) for v in w]
        print(f"order prior without {held}: {out[held or 'all']}", file=sys.stderr)
    return out


def run_set(d: Path, workdir: Path, fit: Mapping[str, Any], order: Sequence[float],
            embedder: Any, mixes: Sequence[float] = ()) -> dict[str, Any]:  # fmt: skip
    from toolscout.evaluate.harness import STRATEGIES, discover_and_score, eval_principal

    held = held_settings(fit)
    strategies: dict[str, Any] = {
        BEFORE: held.but(ranker_order_prior=()),
        AFTER: held.but(ranker_order_prior=tuple(order)),
    }
    prior = fit["prior"][: len(order)]
    for alpha in mixes:  # the order's weights part of the way from the prior's to its own
        mixed = tuple((1 - alpha) * p + alpha * o for p, o in zip(prior, order, strict=True))
        strategies[f"mix {alpha:g}"] = held.but(ranker_order_prior=mixed)
    strategies.update({p: STRATEGIES[p] for p in PARTS})
    rows: dict[str, dict[str, list[float]]] = {
        name: {"recall": [], "complete": [], "confidence": [], "right": []} for name in strategies
    }
    start = time.perf_counter()
    with (
        confidence_model(fit["confidence"]),
        opened_set(d, workdir, None, embedder) as (cat, scored),
    ):
        principal = eval_principal(cat)
        for n, q in enumerate(scored):
            for name, settings in strategies.items():
                discover_and_score(cat, settings, q.query, q.gold, principal, rows[name])
            if (n + 1) % 500 == 0:
                print(f"{d.name}: {n + 1}/{len(scored)} {time.perf_counter() - start:.0f}s",
                      file=sys.stderr, flush=True)  # fmt: skip
    return {"queries": len(scored), "seconds": round(time.perf_counter() - start), "rows": rows}


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / max(len(xs), 1)


def ece(confidence: Sequence[float], right: Sequence[float]) -> float:
    """The ECE of the queries shown a confidence, as ``metrics.reliability`` reports it."""
    from toolscout.evaluate.metrics import reliability

    pairs = [(c, bool(r)) for c, r in zip(confidence, right, strict=True) if c >= 0]
    return float(reliability(pairs)["ece"]) if pairs else 0.0


def report(sets: Mapping[str, Any]) -> list[str]:
    from toolscout.evaluate.fitting import paired_interval

    lines = [
        "| set | queries | bm25 | dense | hybrid-fixed | default before | default after "
        "| after − before, recall@5 (95% CI) / complete@5 | after − best part, recall@5 (95% CI) "
        "/ complete@5 "
        "| ECE before → after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in SETS:
        if name not in sets:
            continue
        rows = sets[name]["rows"]

        def cell(k: str, rows: Mapping[str, Any] = rows) -> str:
            return f"{mean(rows[k]['recall']):.3f} / {mean(rows[k]['complete']):.3f}"

        b, a = rows[BEFORE], rows[AFTER]
        d, lo, hi = paired_interval(a["recall"], b["recall"])
        dc = mean(a["complete"]) - mean(b["complete"])
        best = max(PARTS, key=lambda p: mean(rows[p]["recall"]))
        best_c = max(mean(rows[p]["complete"]) for p in PARTS)
        e, elo, ehi = paired_interval(a["recall"], rows[best]["recall"])
        lines.append(
            f"| {name} | {sets[name]['queries']} | {cell('bm25')} | {cell('dense')} "
            f"| {cell('hybrid-fixed')} | {cell(BEFORE)} | **{cell(AFTER)}** "
            f"| {d:+.3f} [{lo:+.3f}, {hi:+.3f}] / {dc:+.3f} "
            f"| {e:+.3f} [{elo:+.3f}, {ehi:+.3f}] / {mean(a['complete']) - best_c:+.3f} "
            f"| {ece(b['confidence'], b['right']):.3f} → {ece(a['confidence'], a['right']):.3f} |"
        )
    return lines


def variants(rows: Mapping[str, Any]) -> list[str]:
    """The default's variants in order of how far the order's weights moved (0 → 1)."""
    mixes = sorted((k for k in rows if k.startswith("mix ")), key=lambda k: float(k[4:]))
    return [BEFORE, *mixes, AFTER]


def choose(sets: Mapping[str, Any], held: str | None, among: Sequence[str] = ()) -> str:
    """The variant with the largest worst margin over the best part on every set but
    ``held`` (the smaller of the recall@5 and complete@5 margins), then the largest mean
    margin, then the one nearer the default before (as ``steps.choose_gate`` chooses)."""
    names = [n for n in sets if n != held]
    order = list(among) or variants(sets[names[0]]["rows"])

    def key(v: str) -> tuple[float, float, int]:
        m = []
        for n in names:
            rows = sets[n]["rows"]
            best_r = max(mean(rows[p]["recall"]) for p in PARTS)
            best_c = max(mean(rows[p]["complete"]) for p in PARTS)
            m.append(min(mean(rows[v]["recall"]) - best_r, mean(rows[v]["complete"]) - best_c))
        return round(min(m), 9), round(mean(m), 9), -order.index(v)

    return max(order, key=key)


def choice_report(sets: Mapping[str, Any]) -> list[str]:
    from toolscout.evaluate.fitting import paired_interval

    lines = [
        "| set | "
        + " | ".join(variants(next(iter(sets.values()))["rows"]))
        + " | chosen without the set | chosen − before, recall@5 (95% CI) / complete@5 |",
    ]
    lines.append("|---|" + "---|" * (len(lines[0].split("|")) - 3))
    for name in SETS:
        if name not in sets:
            continue
        rows = sets[name]["rows"]
        cells = [f"{mean(rows[v]['recall']):.3f} / {mean(rows[v]['complete']):.3f}"
                 for v in variants(rows)]  # fmt: skip
        pick = choose(sets, name)
        d, lo, hi = paired_interval(rows[pick]["recall"], rows[BEFORE]["recall"])
        dc = mean(rows[pick]["complete"]) - mean(rows[BEFORE]["complete"])
        lines.append(f"| {name} | " + " | ".join(cells)
                     + f" | {pick} | {d:+.3f} [{lo:+.3f}, {hi:+.3f}] / {dc:+.3f} |")  # fmt: skip
    lines.append(f"\nchosen on all six: {choose(sets, None)}")
    return lines


def shapes(bench: Path, workdir: Path) -> dict[str, dict[str, list[float]]]:
    """Per set, each scored query's shape, in the run's order: the parts it reads in
    (``parts.request_parts``) and its distinct content terms."""
    from toolscout.discovery.lexical import terms
    from toolscout.discovery.parts import request_parts
    from toolscout.embed import make_embedder

    out: dict[str, dict[str, list[float]]] = {}
    for d in bench_sets(bench):
        with opened_set(d, workdir, None, make_embedder()) as (_, scored):
            out[d.name] = {
                "parts": [float(len(request_parts(q.query))) for q in scored],
                "terms": [float(len(set(terms(q.query)))) for q in scored],
            }
    return out


#: a gate: (feature, threshold): the order's own weights where the feature is >= it
GATES = [("parts", 2.0), *(("terms", float(t)) for t in (6, 10, 14, 18, 24, 32))]


def gate_report(sets: Mapping[str, Any], shape: Mapping[str, Any]) -> list[str]:
    """The order's own weights only where one feature of the request is at or above a
    threshold, the default's row elsewhere (a per-request mixture of the two rows: the
    product would gate the whole request's ranking, its parts' too), chosen leave-one-set-out
    as :func:`choose` chooses (the default on a tie)."""
    from toolscout.evaluate.fitting import paired_interval

    mixed: dict[str, Any] = {}
    for name, got in sets.items():
        rows = dict(got["rows"])
        for feature, at in GATES:
            on = [v >= at for v in shape[name][feature]]
            before, after = rows[BEFORE], rows[AFTER]
            rows[f"gate {feature}>={at:g}"] = {
                k: [a if o else b for o, a, b in zip(on, after[k], before[k], strict=True)]
                for k in ("recall", "complete")
            }
        mixed[name] = {"rows": rows}
    among = [BEFORE, *(f"gate {f}>={at:g}" for f, at in GATES), AFTER]
    lines = [
        "| set | gate chosen without the set | share gated | held out "
        "| − before, recall@5 (95% CI) / complete@5 |",
        "|---|---|---|---|---|",
    ]
    for name in SETS:
        if name not in mixed:
            continue
        pick = choose(mixed, name, among)
        rows = mixed[name]["rows"]
        share = "–"
        if pick.startswith("gate "):
            feature, at = pick[5:].split(">=")
            share = f"{mean([v >= float(at) for v in shape[name][feature]]):.0%}"
        d, lo, hi = paired_interval(rows[pick]["recall"], rows[BEFORE]["recall"])
        dc = mean(rows[pick]["complete"]) - mean(rows[BEFORE]["complete"])
        r, c = mean(rows[pick]["recall"]), mean(rows[pick]["complete"])
        lines.append(
            f"| {name} | {pick} | {share} | {r:.3f} / {c:.3f} "
            f"| {d:+.3f} [{lo:+.3f}, {hi:+.3f}] / {dc:+.3f} |"
        )
    lines.append(f"\nchosen on all six: {choose(mixed, None, among)}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("fit", "run", "report", "gates"))
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--fits", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument("--fits-order", type=Path, help="the fit step's output")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--sets", default="")
    parser.add_argument(
        "--no-adjust",
        action="store_true",
        help="the order's own weights without the catalog's adjustment of the prior",
    )
    parser.add_argument(
        "--mixes",
        default="",
        help="e.g. 0.25,0.5,0.75: the order's weights "
        "that share of the way from the held-out prior's to its own",
    )
    args = parser.parse_args(argv)
    fits = json.loads(args.fits.read_text())["fits"]
    if args.step == "fit":
        args.out.write_text(json.dumps(fit_orders(args.cache, fits), indent=1))
        return 0
    if args.step == "gates":
        doc = json.loads(args.json.read_text())
        print("\n".join(gate_report(doc["sets"], shapes(args.bench, args.cache))))
        return 0
    if args.step == "report":
        doc = json.loads(args.json.read_text())
        lines = [*report(doc["sets"]), "", *choice_report(doc["sets"])]
        print("\n".join(lines))
        if args.out:  # the means and the tables (the per-query rows stay out of the repo)
            means = {
                n: {k: [mean(r["recall"]), mean(r["complete"])] for k, r in got["rows"].items()}
                for n, got in doc["sets"].items()
            }
            args.out.write_text(json.dumps(
                {"orders": doc.get("orders"), "means": means, "tables": lines}, indent=1
            ) + "\n")  # fmt: skip
        return 0
    from toolscout.embed import make_embedder

    if args.no_adjust:  # the whole process: the default before reads no order weights
        from toolscout.discovery.calibrate import Calibration

        setattr(Calibration, "order_weights_over", lambda self, prior: tuple(prior))  # noqa: B010
    orders = json.loads(args.fits_order.read_text())
    doc = json.loads(args.json.read_text()) if args.json.exists() else {"sets": {}}
    wanted = [s for s in args.sets.split(",") if s] or list(SETS)
    embedder = make_embedder()
    for d in bench_sets(args.bench):
        if d.name not in wanted:
            continue
        mixes = [float(m) for m in args.mixes.split(",") if m]
        got = run_set(d, args.cache, fits[d.name], orders[d.name], embedder, mixes)
        doc["sets"][d.name] = got
        doc["orders"] = orders
        args.json.write_text(json.dumps(doc))
        print(f"{d.name}: done in {doc['sets'][d.name]['seconds']}s", file=sys.stderr)
    print("\n".join(report(doc["sets"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
