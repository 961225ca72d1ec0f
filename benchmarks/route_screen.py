"""A screen (issue 23, h/route18): consult the second encoder only where the default is unsure?

h/ens18 (``benchmarks/ens_screen.py``) fused the default's shortlist with
``multilingual-e5-small``'s dense top-20 by reciprocal rank on every query; every fold chose
weight 0, yet a per-query oracle switch between the two lists would reach the issue's
targets. This screen routes: a query goes to the fusion (``ens_screen.fuse``, RRF k = 60,
e5's weight ``w``) only when the default's own confidence is below ``t``; the rest keep the
default's shortlist. Only the routed queries would pay e5's query encoding.

- The lists are h/ens18's, read from its ``--work`` directory (read-only): per query the
  default's shortlist (``Catalog.discover(k=10, tier="progressive")``, ``SearchSettings()``,
  in-set shipped constants) and e5's dense top-20.
- The confidence is collected here by the same call on a copy of the MiniLM-indexed sets:
  the ``Shortlist.confidence`` the discovery reports, and the inputs of its model
  (``pipeline.confidence_inputs``, read as the discovery computes them), so that the
  *held-out* confidence (``calibrate.CONFIDENCE`` refitted without a set, quality.py's
  ``fits[set]["confidence"]`` in ``benchmarks/results/quality.json``) can be read off them.
  The shortlist's ids must equal h/ens18's default lists.
- Grid ``t`` in :data:`THRESHOLDS` x ``w`` in :data:`WEIGHTS`; ``(t, w)`` chosen
  leave-one-set-out as h/ens18 chose ``w``: the best worst margin against no routing over
  the fold's sets and both metrics (recall@5, complete@5); ties, to 1e-9: fewer routed
  queries (mean share over the fold's sets), then the smaller ``w``. No routing is a
  candidate (margin 0).
- Two confidences: *in-set* (the shipped model, fitted with every set: it flatters the
  screen) and *held-out* (for the fold that holds a set out, every set's confidence is read
  with the model fitted without that set; the ranker prior and Platt step feeding its
  inputs stay the shipped ones).
- Reported only: the share routed per set, a *routed oracle* (below ``t``, each query's
  better first five of the two lists: it reads the gold, a bound on what the confidence can
  give), and the latency arithmetic from ``benchmarks/results/ens_screen.json``'s ``price``
  (no new timing).

    PYTHONPATH=src .venv/bin/python benchmarks/route_screen.py --cache SETS \
        --ens-work /tmp/ens18-work --work WORK [--sets ...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import ens_screen  # noqa: E402
import quality  # noqa: E402

#: confidence thresholds tried: a query below ``t`` is routed to the fusion
THRESHOLDS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
#: weights on e5's vote in the fusion of a routed query (2: e5 dominates)
WEIGHTS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0)
#: "no routing": the default's shortlist on every query
NONE = (0.0, 0.0)
METRICS = ens_screen.METRICS
OUT = ROOT / "benchmarks" / "results" / "route_screen.json"
QUALITY = ROOT / "benchmarks" / "results" / "quality.json"
ORDER = ens_screen.ORDER

Pair = tuple[float, float]


def routed_list(default: Sequence[str], second: Sequence[str], conf: float, t: float,
                w: float) -> list[str]:  # fmt: skip
    """The default's list, or its fusion with ``second`` (weight ``w``) when ``conf`` < ``t``."""
    if not 0.0 <= conf <= 1.0 or math.isnan(conf):
        raise ValueError(f"a confidence must be a probability in [0, 1], got {conf!r}")
    if conf < t and w > 0:
        return ens_screen.fuse(default, second, w)
    return list(default)


def set_scores(
    lists: Mapping[str, Any], conf: Sequence[float], t: float, w: float
) -> dict[str, float]:
    """A set's recall@5, complete@5 and share of queries routed under ``(t, w)``."""
    if len(conf) != len(lists["gold"]):
        raise ValueError(f"{len(conf)} confidences for {len(lists['gold'])} queries")
    rec, com, routed = [], [], 0
    for gold, a, b, c in zip(lists["gold"], lists["default"], lists["e5"], conf, strict=True):
        ranked = routed_list(a, b, c, t, w)
        routed += int(c < t and w > 0)
        rec.append(ens_screen.recall_at(ranked, gold))
        com.append(ens_screen.complete_at(ranked, gold))
    n = len(rec)
    if n == 0:
        raise ValueError("a set with no scorable query")
    return {"recall@5": sum(rec) / n, "complete@5": sum(com) / n, "routed": routed / n}


def routed_oracle(lists: Mapping[str, Any], conf: Sequence[float], t: float) -> dict[str, float]:
    """A bound, not a method: below ``t``, each query's better first five of the default's
    list and e5's (it reads the gold); above, the default's."""
    rec, com = [], []
    for gold, a, b, c in zip(lists["gold"], lists["default"], lists["e5"], conf, strict=True):
        ra, rb = ens_screen.recall_at(a, gold), ens_screen.recall_at(b, gold)
        ca, cb = ens_screen.complete_at(a, gold), ens_screen.complete_at(b, gold)
        rec.append(max(ra, rb) if c < t else ra)
        com.append(max(ca, cb) if c < t else ca)
    if not rec:
        raise ValueError("a set with no scorable query")
    return {"recall@5": sum(rec) / len(rec), "complete@5": sum(com) / len(com)}


def grid(lists: Mapping[str, Any], conf: Sequence[float]) -> dict[Pair, dict[str, float]]:
    """Every ``(t, w)`` of the grid, and :data:`NONE`."""
    out = {NONE: set_scores(lists, conf, 0.0, 0.0)}
    for t in THRESHOLDS:
        for w in WEIGHTS:
            out[(t, w)] = set_scores(lists, conf, t, w)
    return out


def worst_margin(table: Mapping[str, Mapping[Pair, Mapping[str, float]]], sets: Sequence[str],
                 pair: Pair) -> float:  # fmt: skip
    """The least, over ``sets`` and both metrics, of the score at ``pair`` minus no routing."""
    if not sets:
        raise ValueError("a fold with no set to fit on")
    return min(table[s][pair][m] - table[s][NONE][m] for s in sets for m in METRICS)


def choose(table: Mapping[str, Mapping[Pair, Mapping[str, float]]], sets: Sequence[str]) -> Pair:
    """The ``(t, w)`` with the best worst margin over ``sets`` against no routing; ties (to
    1e-9): the fewer queries routed (mean share over ``sets``), then the smaller ``w``,
    then the smaller ``t``."""
    pairs = list(next(iter(table.values())))
    if NONE not in pairs:
        raise ValueError("the grid must hold no routing (the default alone)")

    def key(p: Pair) -> tuple[float, float, float, float]:
        share = sum(table[s][p]["routed"] for s in sets) / len(sets)
        return (-round(worst_margin(table, sets, p), 9), round(share, 9), p[1], p[0])

    return min(pairs, key=key)


def held_out(
    tables: Mapping[str, Mapping[str, Mapping[Pair, Mapping[str, float]]]],
) -> dict[str, Any]:
    """Each set held out: ``tables[held][set][pair]`` is the grid with the confidence of the
    fold that holds ``held`` out; the pair chosen on the other sets, read on ``held``."""
    out: dict[str, Any] = {}
    for name, table in tables.items():
        others = [s for s in table if s != name]
        t, w = choose(table, others)
        got = table[name][(t, w)]
        out[name] = {
            "t": t,
            "w": w,
            "fit_worst_margin": round(worst_margin(table, others, (t, w)), 4),
            "routed": round(got["routed"], 4),
            **{m: round(got[m], 4) for m in METRICS},
            **{f"{m} gain": round(got[m] - table[name][NONE][m], 4) for m in METRICS},
        }
    return out


def mixture_quantile(q: float, share: float) -> tuple[str, float]:
    """Where the ``q``-quantile of a mix of unrouted (``1 - share``) and routed (``share``,
    each slower than any unrouted one) requests falls: ("default", the unrouted requests'
    own quantile) or ("routed", the routed requests' own quantile)."""
    if not 0 < q < 1 or not 0 <= share <= 1:
        raise ValueError(f"a quantile in (0, 1) and a share in [0, 1], got {q!r}, {share!r}")
    if q < 1 - share:
        return "default", q / (1 - share)
    return "routed", (q - (1 - share)) / share


# -- collecting the confidence ----------------------------------------------------------


@contextmanager
def watched() -> Iterator[list[dict[str, Any]]]:
    """``pipeline.shown_confidence`` watched: each call's model inputs, whether the encoder
    was skipped, and the value it returned (the discovery itself is unchanged)."""
    from toolscout.discovery import pipeline

    seen: list[dict[str, Any]] = []
    real = pipeline.shown_confidence

    def shown(catalog: Any, query: Any, retrieval: Any, chosen: Any, exact: Any,
              settings: Any, skipped: str = "") -> float:  # fmt: skip
        value = real(catalog, query, retrieval, chosen, exact, settings, skipped)
        inputs = None
        if chosen and settings.fusion == "learned":
            inputs = pipeline.confidence_inputs(catalog, query, retrieval, chosen, exact)
        seen.append({"inputs": inputs, "skipped": bool(skipped), "value": value,
                     "shift": catalog.confidence_shift.shift})  # fmt: skip
        return value

    pipeline.shown_confidence = shown
    try:
        yield seen
    finally:
        pipeline.shown_confidence = real


def collect_confidence(d: Path, cache: Path) -> dict[str, Any]:
    """Per query of a set: the default's shortlist ids, its reported confidence, and the
    inputs of the confidence model that gave it (``None`` where the value is by rule)."""
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.harness import eval_principal
    from toolscout.settings import SearchSettings

    if not (cache / f"{d.name}.db").exists():
        raise SystemExit(f"error: {cache} has no indexed {d.name} (copy /tmp/q18/cache there)")
    start = time.perf_counter()
    ids, lists, conf, inputs, skipped = [], [], [], [], []
    with quality.opened_set(d, cache, None, MiniLMEmbedder()) as (cat, queries):
        principal = eval_principal(cat)
        for q in queries:
            with watched() as seen:
                got = cat.discover(q.query, principal, k=ens_screen.DEFAULT_DEPTH,
                                   settings=SearchSettings(), tier="progressive")  # fmt: skip
            ids.append(q.id)
            lists.append(list(got.ids))
            conf.append(float(got.confidence))
            # the model's value is the reported one unless a later step set it by rule
            last = seen[-1] if seen else None
            same = (
                last is not None
                and last["inputs"] is not None
                and math.isclose(last["value"], got.confidence, abs_tol=1e-12)
            )
            inputs.append(last["inputs"] if same and last is not None else None)
            skipped.append(bool(last["skipped"]) if same and last is not None else False)
    seconds = round(time.perf_counter() - start, 1)
    return {"ids": ids, "lists": lists, "confidence": conf, "inputs": inputs,
            "skipped": skipped, "seconds": seconds}  # fmt: skip


def held_confidence(rows: Mapping[str, Any], model: Sequence[float]) -> list[float]:
    """The confidence of each query read with ``model`` (a refit without some set); a query
    whose value is by rule, or whose ranking skipped the encoder (its own model, not
    refitted per fold), keeps the reported value."""
    from toolscout.discovery import calibrate

    out = []
    for c, x, skip in zip(rows["confidence"], rows["inputs"], rows["skipped"], strict=True):
        out.append(c if x is None or skip else calibrate.confidence(x, model=model))
    return out


def load_lists(name: str, ens_work: Path) -> dict[str, Any]:
    """h/ens18's kept lists of a set (gold, the default's ten, e5's twenty)."""
    try:
        default = json.loads((ens_work / f"{name}.default.json").read_text(encoding="utf-8"))
        e5 = json.loads((ens_work / f"{name}.e5.json").read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SystemExit(f"error: {ens_work} lacks h/ens18's lists of {name} ({exc})") from exc
    if e5["ids"] != default["ids"]:
        raise SystemExit(f"error: {name}'s queries differ between h/ens18's two lists")
    return {"ids": default["ids"], "gold": default["gold"], "default": default["lists"],
            "e5": e5["lists"]}  # fmt: skip


# -- the price (arithmetic on h/ens18's timings) ----------------------------------------


def price_lines(shares: Mapping[str, float], ens_json: Path) -> tuple[list[str], dict[str, Any]]:
    """What routing a share of bfcl's requests would do to its latency quantiles, from
    h/ens18's per-round p50s (the default's discovery and e5's query encoding)."""
    try:
        runs = json.loads(ens_json.read_text(encoding="utf-8"))["price"]
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise SystemExit(f"error: {ens_json} has no h/ens18 price runs ({exc})") from exc
    rounds = [r for run in runs for r in run["rounds"]]
    default = statistics.median(r["default"] for r in rounds)
    e5 = statistics.median(r["e5"] for r in rounds)
    lines = [f"h/ens18's price rounds ({len(rounds)}): the default's discovery p50 "
             f"{default:.2f} ms (median of rounds), e5's query encoding p50 {e5:.2f} ms", "",
             "| confidence | bfcl share routed | p50 falls in | p90 falls in | p99 falls in |",
             "|---|---|---|---|---|"]  # fmt: skip
    out: dict[str, Any] = {"default_p50_ms": default, "e5_encode_p50_ms": e5, "rows": {}}
    for label, share in shares.items():
        cells = []
        row = {}
        for q in (0.5, 0.9, 0.99):
            part, at = mixture_quantile(q, share)
            cells.append(f"{part}'s q{at:.2f}")
            row[f"p{round(q * 100)}"] = [part, round(at, 3)]
        out["rows"][label] = {"share": round(share, 4), **row}
        lines.append(f"| {label} | {share:.3f} | " + " | ".join(cells) + " |")
    return lines, out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=quality.DEFAULT_BENCH)
    parser.add_argument("--cache", type=Path, required=True, help="the sets indexed with MiniLM")
    parser.add_argument("--ens-work", type=Path, required=True, help="h/ens18's kept lists")
    parser.add_argument("--work", type=Path, required=True, help="the confidences (JSON)")
    parser.add_argument("--sets", default=",".join(ORDER), help="comma-separated dev sets")
    parser.add_argument("--collect-only", action="store_true", help="collect, no table")
    parser.add_argument("--quality", type=Path, default=QUALITY)
    parser.add_argument("--ens-json", type=Path, default=ens_screen.OUT)
    parser.add_argument("--json", type=Path, default=OUT)
    args = parser.parse_args(argv)
    os.environ.pop("TOOLSCOUT_VECTOR_CACHE", None)
    known, names = ens_screen.named_sets(args.bench, args.sets)
    lists, rows = {}, {}
    for s in names:
        lists[s] = load_lists(s, args.ens_work)
        rows[s] = ens_screen._kept(args.work / f"{s}.conf.json",
                        lambda s=s: collect_confidence(known[s], args.cache))  # fmt: skip
        if rows[s]["ids"] != lists[s]["ids"] or rows[s]["lists"] != lists[s]["default"]:
            bad = sum(a != b for a, b in zip(rows[s]["lists"], lists[s]["default"], strict=False))
            raise SystemExit(f"error: {s}: the default's shortlists differ from h/ens18's "
                             f"({bad} queries)")  # fmt: skip
        print(f"{s}: {len(rows[s]['ids'])} queries, ids equal h/ens18's default lists "
              f"({rows[s]['seconds']} s)", flush=True)  # fmt: skip
    if args.collect_only or len(names) < 2:
        return 0
    try:
        fits = json.loads(args.quality.read_text(encoding="utf-8"))["fits"]
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise SystemExit(f"error: {args.quality} has no per-set fits ({exc})") from exc
    conf_in = {s: rows[s]["confidence"] for s in names}
    inset = {s: grid(lists[s], conf_in[s]) for s in names}
    held_in = held_out({h: inset for h in names})
    # the held-out confidence: the fold that holds h out reads every set with fits[h]
    conf_held = {h: {s: held_confidence(rows[s], fits[h]["confidence"]) for s in names}
                 for h in names}  # fmt: skip
    tables_held = {h: {s: grid(lists[s], conf_held[h][s]) for s in names} for h in names}
    held_held = held_out(tables_held)
    by_rule = {s: sum(x is None for x in rows[s]["inputs"]) for s in names}
    skip = {s: sum(rows[s]["skipped"]) for s in names}
    oracle = {s: {f"{t:g}": {m: round(v, 4)
                             for m, v in routed_oracle(lists[s], conf_held[s][s], t).items()}
                  for t in THRESHOLDS} for s in names}  # fmt: skip
    # reported only, post hoc: each set's best pair in-set on its own (an in-set ceiling)
    own = {}
    for s in names:
        p = choose({s: inset[s]}, [s])
        own[s] = {"t": p[0], "w": p[1], **{f"{m} gain": round(inset[s][p][m] - inset[s][NONE][m], 4)
                                          for m in METRICS}}  # fmt: skip
    lines = []
    for label, held in (("in-set confidence (flatters)", held_in),
                        ("held-out confidence", held_held)):  # fmt: skip
        lines += ["", f"held out, {label}: (t, w) chosen on the other five sets", "",
                  "| set | t | w | routed | held-out recall@5 / complete@5 | "
                  "gain over no routing |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for s in names:
            h = held[s]
            lines.append(f"| {s} | {h['t']:g} | {h['w']:g} | {h['routed']:.3f} | "
                         f"{h['recall@5']:.3f} / {h['complete@5']:.3f} | "
                         f"{h['recall@5 gain']:+.3f} / {h['complete@5 gain']:+.3f} |")  # fmt: skip
    lines += [
        "",
        "share routed by t (held-out confidence of the set's own fold)",
        "",
        "| t | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for t in THRESHOLDS:
        cells = [f"{sum(c < t for c in conf_held[s][s]) / len(conf_held[s][s]):.3f}" for s in names]
        lines.append(f"| {t:g} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "routed oracle (bound; held-out confidence): recall@5 / complete@5",
        "",
        "| t | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for t in THRESHOLDS:
        k = f"{t:g}"
        cells = [
            f"{oracle[s][k]['recall@5']:.3f} / {oracle[s][k]['complete@5']:.3f}" for s in names
        ]
        lines.append(f"| {t:g} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "in-set, in-set confidence: best worst-margin pair of each set on its own "
        "(post hoc ceiling): " + "; ".join(f"{s} {own[s]}" for s in names),
    ]
    shares: dict[str, float] = {}
    if "bfcl" in names:
        for label, held in (("in-set", held_in), ("held-out", held_held)):
            shares[f"{label}, bfcl's fold"] = held["bfcl"]["routed"]
        for t in THRESHOLDS:
            c = conf_held["bfcl"]["bfcl"]
            shares[f"held-out, t = {t:g}"] = sum(x < t for x in c) / len(c)
        plines, pout = price_lines(shares, args.ens_json)
        lines += ["", *plines]
    else:
        pout = {}
    print("\n".join(lines))
    command = quality.command_line("benchmarks/route_screen.py", list(sys.argv[1:] if argv is None
                                                                      else argv))  # fmt: skip
    quality.write_results(
        args.json,
        command,
        thresholds=list(THRESHOLDS),
        weights=list(WEIGHTS),
        rrf_k=ens_screen.RRF_K,
        e5_depth=ens_screen.E5_DEPTH,
        sets={s: {"n": len(lists[s]["ids"]), "seconds": rows[s]["seconds"],
                  "confidence_by_rule": by_rule[s], "encoder_skipped": skip[s],
                  "in_set": {f"{t:g}/{w:g}": {m: round(v, 4) for m, v in r.items()}
                             for (t, w), r in inset[s].items()},
                  "held_out_confidence_own_fold": {
                      f"{t:g}/{w:g}": {m: round(v, 4) for m, v in r.items()}
                      for (t, w), r in tables_held[s][s].items()},
                  "routed_oracle": oracle[s],
                  "own_in_set_best": own[s]}
              for s in names},
        held_out_in_set_confidence=held_in,
        held_out_held_out_confidence=held_held,
        price=pout,
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
