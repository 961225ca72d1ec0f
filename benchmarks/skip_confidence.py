"""The confidence of a ranking made without the query encoder, fitted leave-one-set-out.

    PYTHONPATH=src python benchmarks/skip_confidence.py
        [--rows benchmarks/results/encoder_skip.json] [--fits benchmarks/results/quality.json]
        [--out benchmarks/results/skip_confidence.json]

Reads what ``benchmarks/encoder_skip.py --confidence QUALITY_JSON`` recorded per query
(nothing is re-run): for every request, the held-out confidence of its hybrid selection and
whether its first tool is gold; for every request the shipped skip rule skips, the inputs
of the skipped selection's confidence and whether its first tool is gold; for each set's
no-tool requests that are skipped, their inputs.

The model (``confidence.CONFIDENCE_SKIPPED``) is fitted by
``confidence.fit_skipped_confidence`` (a bias per set, the median shipped; the dense inputs
weigh 0) on the skipped requests of the *other* sets; a set enters a fit only with at least
:data:`MIN_SKIPPED` skipped requests, and each set entering weighs the same, its skipped
no-tool requests weighing per request as in quality.py's fit of ``CONFIDENCE`` (a set's
requests ``1 - NO_TOOL_SHARE`` over its count, its no-tool requests ``NO_TOOL_SHARE`` over
theirs). The shipped model is the fit on every set.

Per set it reports the reliability (deciles, the largest gap over the deciles holding at
least 5% of the queries, ECE) of the skipped requests' confidence — today's (the set's
held-out ``CONFIDENCE`` read on a skipped ranking) and the held-out skipped model's — and of
the whole set: the skip off, the skip on with today's model, the skip on with the new one.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality  # noqa: E402

#: a set enters the fit only with at least this many skipped requests (chosen before any
#: result: fewer cannot say much of a per-set bias)
MIN_SKIPPED = 50
#: the issue's reading: no decile holding >= 5% of the queries off by more than this
MAX_GAP = 0.1
NO_TOOL = "_no_tool"


def skipped_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, right) of a set's requests the shipped rule skipped with a tool shown."""
    got = [r for r in rows if r.get("skip") and r.get("xs") is not None]
    from toolscout.discovery.confidence import CONFIDENCE_INPUTS

    width = len(CONFIDENCE_INPUTS)
    x = np.array([r["xs"] for r in got], dtype=np.float64).reshape(len(got), width)
    y = np.array([float(r["rs"]) for r in got], dtype=np.float64)
    return x, y


def fit_without(
    per_set: Mapping[str, Sequence[Mapping[str, Any]]],
    no_tool: Mapping[str, Any],
    held_out: str | None,
) -> tuple[list[float] | None, list[str]]:
    """The skipped model fitted on every set but ``held_out`` (None: all), and the sets it
    was fitted on (None when no set has enough skipped requests)."""
    from toolscout.discovery.confidence import fit_skipped_confidence

    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    ws: list[np.ndarray] = []
    gs: list[np.ndarray] = []
    used: list[str] = []
    for name in sorted(per_set):
        if name == held_out:
            continue
        x, y = skipped_rows(per_set[name])
        if len(y) < MIN_SKIPPED:
            continue
        n_rows = len(per_set[name])
        neg = no_tool.get(name) or {}
        xn = np.array(neg.get("xs") or [], dtype=np.float64).reshape(-1, x.shape[1])
        n_neg = int(neg.get("requests") or 0)
        # per request as in quality.fit_confidence_without, then the set normalised to 1
        w = np.full(len(y), (1.0 - quality.NO_TOOL_SHARE) / max(n_rows, 1))
        wn = np.full(len(xn), quality.NO_TOOL_SHARE / max(n_neg, 1))
        total = w.sum() + wn.sum()
        xs += [x, xn]
        ys += [y, np.zeros(len(xn))]
        ws += [w / total, wn / total]
        gs.append(np.full(len(y) + len(xn), len(used)))
        used.append(name)
    if not used:
        return None, []
    model = fit_skipped_confidence(
        np.vstack(xs), np.concatenate(ys), np.concatenate(ws), np.concatenate(gs)
    )
    return list(model), used


def conf_of(x: np.ndarray, model: Sequence[float]) -> list[float]:
    from toolscout.discovery.confidence import sigmoid

    if not len(x):
        return []
    return [float(v) for v in sigmoid(x @ np.asarray(model, dtype=np.float64))]


def reliability(pairs: Sequence[tuple[float, bool]]) -> dict[str, Any]:
    from toolscout.evaluate.metrics import reliability as deciles

    if not pairs:
        return {"n": 0}
    out = deciles(pairs)
    mean = sum(c for c, _ in pairs) / len(pairs)
    right = sum(1 for _, r in pairs if r) / len(pairs)
    return {"n": len(pairs), "mean_confidence": round(mean, 3), "right": round(right, 3), **out}


def whole_set(
    rows: Sequence[Mapping[str, Any]], skipped_conf: Sequence[float] | None
) -> list[tuple[float, bool]]:
    """(confidence, first tool right) of every request shown a tool: the hybrid selection's
    held-out confidence, or (``skipped_conf``, in order) the skipped selection's."""
    out: list[tuple[float, bool]] = []
    it = iter(skipped_conf or [])
    for r in rows:
        if skipped_conf is not None and r.get("skip") and r.get("xs") is not None:
            out.append((next(it), bool(r["rs"])))
        elif r.get("conf") is not None:
            out.append((float(r["conf"]), bool(r["right"])))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=Path, default=ROOT / "benchmarks/results/encoder_skip.json")
    ap.add_argument("--fits", type=Path, default=ROOT / "benchmarks/results/quality.json")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/skip_confidence.json")
    args = ap.parse_args(argv)
    doc = json.loads(args.rows.read_text())
    per_set: dict[str, list[dict[str, Any]]] = dict(doc.get("rows", doc))
    stored: Any = doc.get("no_tool") or per_set.pop(NO_TOOL, {})
    no_tool: dict[str, Any] = dict(stored)
    per_set.pop(NO_TOOL, None)
    if not any("conf" in r for rows in per_set.values() for r in rows):
        raise SystemExit(
            f"error: {args.rows} has no confidence readings: run benchmarks/encoder_skip.py "
            "with --confidence benchmarks/results/quality.json"
        )
    fits = json.loads(args.fits.read_text())["fits"]
    shipped, shipped_on = fit_without(per_set, no_tool, None)
    report: dict[str, Any] = {}
    for name, rows in per_set.items():
        model, used = fit_without(per_set, no_tool, name)
        x, y = skipped_rows(rows)
        today = conf_of(x, fits[name]["confidence"])
        new = conf_of(x, model) if model is not None else today
        right = [bool(v) for v in y]
        neg = np.array((no_tool.get(name) or {}).get("xs") or [], dtype=np.float64)
        neg = neg.reshape(len(neg), x.shape[1])
        report[name] = {
            "fitted_on": used,
            "model": model,
            "skipped": len(y),
            "skipped_today": reliability(list(zip(today, right, strict=True))),
            "skipped_held_out": reliability(list(zip(new, right, strict=True))),
            "whole_skip_off": reliability(whole_set(rows, None)),
            "whole_skip_on_today": reliability(whole_set(rows, today)),
            "whole_skip_on_held_out": reliability(whole_set(rows, new)),
            "no_tool_skipped": {
                "requests": int((no_tool.get(name) or {}).get("requests") or 0),
                "skipped": len(neg),
                "mean_confidence_held_out": round(float(np.mean(conf_of(neg, model))), 3)
                if len(neg) and model is not None
                else None,
            },
        }
    print(f"shipped CONFIDENCE_SKIPPED (fitted on {', '.join(shipped_on)}): {shipped}")
    print(
        "| set | skipped | right | skipped: today's mean / max gap / ECE | skipped, held out: "
        "mean / max gap / ECE | whole set, skip off: max gap / ECE | skip on, today's | "
        "skip on, held out | no-tool skipped |"
    )
    print("|---|---|---|---|---|---|---|---|---|")

    def g(r: Mapping[str, Any], mean: bool = False) -> str:
        if not r.get("n"):
            return "—"
        head = f"{r['mean_confidence']:.3f} / " if mean else ""
        return f"{head}{r['max_gap']:.3f} / {r['ece']:.3f}"

    for name, r in report.items():
        nt = r["no_tool_skipped"]
        mean = nt["mean_confidence_held_out"]
        print(
            f"| {name} | {r['skipped']} | {r['skipped_held_out'].get('right', 0):.3f} | "
            f"{g(r['skipped_today'], True)} | {g(r['skipped_held_out'], True)} | "
            f"{g(r['whole_skip_off'])} | {g(r['whole_skip_on_today'])} | "
            f"{g(r['whole_skip_on_held_out'])} | {nt['skipped']} of {nt['requests']}"
            f"{'' if mean is None else f', mean {mean}'} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    shown = sys.argv[1:] if argv is None else argv
    quality.write_results(
        args.out,
        quality.command_line("benchmarks/skip_confidence.py", shown),
        min_skipped=MIN_SKIPPED,
        max_gap=MAX_GAP,
        shipped={"model": shipped, "fitted_on": shipped_on},
        sets=report,
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
