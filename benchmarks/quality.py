"""Retrieval quality over every evaluation set, with every data-fitted constant held out.

A set is a directory holding ``tools.jsonl`` and ``queries.jsonl`` (default: every
one under ``../shared/bench/``). Two passes:

1. index every set and turn its queries into ranker examples (the product's own
   retrieval); fit the learned ranker's prior and the confidence scaling on all sets
   but one, for each set (leave-one-set-out), and on all of them (what ships);
2. run the strategies on each set: its own ``bm25``, ``dense`` and ``hybrid-fixed``,
   the product default as shipped (``hybrid``: in-set, its constants saw this set) and
   ``hybrid-held-out`` (the same with the constants fitted without this set).

Writes:

- ``docs/benchmarks.md``: the tables, between ``<!-- quality:start -->`` and
  ``<!-- quality:end -->`` (the rest of the file is kept; created if missing),
  with the command that reproduces them;
- ``benchmarks/results/quality.json``: every report, as ``toolscout eval --json`` prints it;
- ``docs/recall_at_k.png``: recall@k per strategy, one subplot per set.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/quality.py [--bench DIR] [--limit N]
[--cache DIR]`` (``--cache`` keeps the indexed sets between runs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import string
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BENCH = ROOT.parent / "shared" / "bench"
START, END = "<!-- quality:start -->", "<!-- quality:end -->"
#: the weight of each set's requests no tool serves in the confidence fit (a share of the
#: set's; fixed by design, not fitted: the dev sets hold no such request to fit it on)
NO_TOOL_SHARE = 0.1
#: the strategies every set runs (plus hybrid-held-out): the parts, then the shipped default
PARTS = ("bm25", "dense", "hybrid-fixed")
IN_SET = ("hybrid", "hybrid-no-prerequisites")
STRATEGIES = (*PARTS, *IN_SET)
#: the lexical lead's margin is chosen on this grid (calibrate.LEAD_MARGIN); 1 never leads
LEAD_MARGINS = (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 1.0)
HELD_OUT = "hybrid-held-out"
#: the held-out default reading every request whole and never leading lexical
WHOLE = "hybrid-whole"


def bench_sets(bench: Path) -> list[Path]:
    sets = sorted(
        d
        for d in bench.iterdir()
        if (d / "tools.jsonl").is_file() and (d / "queries.jsonl").is_file()
    )
    if not sets:
        raise SystemExit(f"error: no directory under {bench} holds tools.jsonl and queries.jsonl")
    return sets


def splice(existing: str, section: str) -> str:
    """``existing`` with the marked section replaced (or appended when it has none)."""
    block = f"{START}\n{section.rstrip()}\n{END}"
    if START in existing and END in existing:
        head, rest = existing.split(START, 1)
        return head + block + rest.split(END, 1)[1]
    if not existing.strip():
        return f"# Benchmarks\n\n{block}\n"
    return existing.rstrip() + "\n\n" + block + "\n"


def goal_table(
    reports: Mapping[str, Mapping[str, Any]], grid: Mapping[str, Any] | None = None
) -> list[str]:
    """recall@5 / complete@5 per set: the parts, the default in-set and held out; whether
    the held-out default reaches the best part on both; its ECE beside the fixed fusion's."""
    lines = [
        "| set | bm25 | dense | hybrid-fixed | default in-set | default held-out "
        "| held-out ≥ best part (recall, complete) | recall − best part, 95% CI "
        "| default w/o parts, no lead | ECE fixed | ECE held-out |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, report in reports.items():
        m = report["strategies"]

        def cell(key: str, m: Mapping[str, Any] = m) -> str:
            if key not in m:
                return "–"
            return f"{float(m[key]['recall@5']):.3f} / {float(m[key]['complete@5']):.3f}"

        def best(metric: str, m: Mapping[str, Any] = m) -> float:
            return max(float(m[k][metric]) for k in ("bm25", "dense", "hybrid-fixed") if k in m)

        def ece(key: str, m: Mapping[str, Any] = m) -> str:
            rel = m.get(key, {}).get("reliability") or {}
            return f"{rel['ece']:.3f}" if "ece" in rel else "–"

        held = m.get(HELD_OUT, {})
        ok = [
            "yes" if float(held.get(x, float("nan"))) >= best(x) else "no"
            for x in ("recall@5", "complete@5")
        ]
        ci = (grid or {}).get(name, {}).get("held_out_margin")
        interval = f"{ci[0]:+.3f} [{ci[1]:+.3f}, {ci[2]:+.3f}]" if ci else "–"
        lines.append(
            f"| {name} | {cell('bm25')} | {cell('dense')} | {cell('hybrid-fixed')} "
            f"| {cell('hybrid')} | **{cell(HELD_OUT)}** | {', '.join(ok)} | {interval} "
            f"| {cell('hybrid-whole')} | {ece('hybrid-fixed')} | {ece(HELD_OUT)} |"
        )
    return lines


def grid_table(grid: Mapping[str, Any], fits: Mapping[str, Any]) -> list[str]:
    """Each (blend, yield) pair's recall@5 margin over each set's best part (each set run
    with its held-out prior), and the worst of them; the pair each fit chose is marked."""
    if not grid:
        return []
    names = list(grid)
    pairs = [k for k in grid[names[0]] if "/" in k]
    chosen: dict[str, list[str]] = {}
    for who, fit in fits.items():
        if fit.get("blend") is not None:
            chosen.setdefault(f"{fit['blend']:g}/{fit['dedupe_yield']:g}", []).append(who)
    lines = [
        "The blend and dedupe yield grid (`fitting.recall_grid`): recall@5 of the default "
        "minus the set's best part ("
        + ", ".join(f"{n} {grid[n]['best_part']:.3f}" for n in names)
        + "); a fit takes the pair with the largest worst margin over its sets, on a tie the "
        "larger mean margin, then the smaller blend and yield (`fitting.choose_blend`)."
        + (
            " Each catalog takes its own blend (`catalog_evidence.catalog_blend`): the smaller "
            "where its own multi-tool pseudo-queries find more at it than at the larger by more "
            "than a margin; the fit chooses the margin and the yield by the same rule over "
            "its sets, each set at its own blend (`catalog_evidence.choose_blend_margin`); "
            "the last column marks the pair the fit without a set gives that set."
            if any("blend_margin" in f for f in fits.values())
            else ""
        ),
        "",
        "| blend / yield | " + " | ".join(names) + " | worst | chosen by the fit without |",
        "|---|" + "---|" * (len(names) + 2),
    ]
    for pair in pairs:
        margins = [grid[n][pair] - grid[n]["best_part"] for n in names]
        lines.append(
            f"| {pair} | "
            + " | ".join(f"{m:+.3f}" for m in margins)
            + f" | {min(margins):+.3f} | {', '.join(chosen.get(pair, []))} |"
        )
    return lines


def calibrated_max_gap(deciles: Sequence[Mapping[str, Any]], rounds: int = 2000) -> float:
    """The max gap a perfectly calibrated confidence would show on this sample, 95th
    percentile: each decile's right answers drawn as Binomial(n, its mean confidence)."""
    import numpy as np

    from toolscout.evaluate.metrics import RELIABILITY_MIN_SHARE

    total = sum(int(d["n"]) for d in deciles)
    kept = [d for d in deciles if d["n"] >= RELIABILITY_MIN_SHARE * total]
    if not kept:
        return 0.0
    rng = np.random.default_rng(20261130)
    n = np.array([int(d["n"]) for d in kept])
    p = np.clip(np.array([float(d["confidence"]) for d in kept]), 0.0, 1.0)
    drawn = rng.binomial(n, p, size=(rounds, len(kept))) / n
    return float(np.percentile(np.abs(drawn - p).max(axis=1), 95))


def reliability_table(reports: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Held-out confidence against how often the top tool was right, per decile."""
    lines = [
        "| set | decile | queries | mean confidence | top tool right | gap |",
        "|---|---|---|---|---|---|",
    ]
    for name, report in reports.items():
        rel = report["strategies"].get(HELD_OUT, {}).get("reliability") or {}
        n = sum(row["n"] for row in rel.get("deciles", []))
        for row in rel.get("deciles", []):
            gap = abs(row["confidence"] - row["right"])
            small = " (<5%)" if row["n"] < 0.05 * n else ""
            lines.append(
                f"| {name} | {row['decile'] / 10:.1f}–{(row['decile'] + 1) / 10:.1f} "
                f"| {row['n']}{small} | {row['confidence']:.2f} | {row['right']:.2f} | {gap:.2f} |"
            )
        if rel.get("deciles"):
            floor = calibrated_max_gap(rel["deciles"])
            lines.append(
                f"| {name} | max gap (deciles ≥5%); ECE {rel['ece']:.2f}; a calibrated "
                f"model on this sample: up to {floor:.2f} (95%) | {n} | | "
                f"| **{rel['max_gap']:.2f}** |"
            )
    return lines


def lead_line(grid: Mapping[str, Any]) -> str:
    """What the held-out column says of its reading: every set at its fold's final constants
    (:func:`fit_lead_margin`), and the sets whose fold's margin decides the lexical lead
    otherwise than the shipped one."""
    moved = {n: g["held_out_lead"] for n, g in grid.items() if "held_out_lead" in g}
    final = (
        " Each set's held-out figures and interval are read with every constant of its fold, "
        "the Platt step refitted after the blend was chosen included (the blend grid below "
        "runs with the one fitted before it and the shipped lead margin, so its cells can "
        "differ from the held-out column in the fourth decimal; until round twenty-five the "
        "column was read from the grid)."
    )
    if not moved:
        return final + (
            " The held-out default runs with the lexical lead as its fold's margin decides "
            "(on these sets the same as the shipped margin)."
        )
    said = ", ".join(f"{n} {how}" for n, how in sorted(moved.items()))
    return final + (
        " The held-out default runs with the lexical lead as its fold's margin decides: "
        f"where that differs from the shipped margin ({said}), the set's held-out figures "
        "and interval are read with its fold's lead."
    )


def lead_table(grid: Mapping[str, Any]) -> list[str]:
    """Each set's own evidence for the lexical lead and what leading does to it."""
    rows = [(n, g["lead"]) for n, g in grid.items() if "lead" in g]
    if not rows:
        return []
    return [
        "The lexical lead (`calibrate.LEAD_MARGIN`): a catalog's pseudo-query recall@5 of "
        "BM25 minus the learned ranker's (computed at index time from the catalog alone), "
        "and the held-out default's recall@5 with BM25 leading and without; the margin is "
        "chosen leave-one-set-out for the best mean recall@5 over the other sets, the "
        "smaller on a tie (`fit_lead_margin`).",
        "",
        "| set | pseudo bm25 − ranker | recall@5 without | recall@5 leading |",
        "|---|---|---|---|",
        *[
            f"| {n} | {r['pseudo_gap']:+.3f} | {r.get('recall@5 without', '–')} "
            f"| {r.get('recall@5 leading', '– (never leads on the grid)')} |"
            for n, r in rows
        ],
    ]


def no_tool_table(grid: Mapping[str, Any]) -> list[str]:
    """Held-out confidence of the requests no tool serves (``no_tool_requests``)."""
    rows = [(n, g["no_tool"]) for n, g in grid.items() if "no_tool" in g]
    if not rows:
        return []
    return [
        "Requests no tool serves (`no_tool_requests`: words of three unrelated tools "
        "shuffled, and strings of random letters; the outcome is always wrong), with the "
        "confidence model fitted without the set; *flagged* is the share below "
        "`SearchSettings.confidence_threshold`:",
        "",
        "| set | requests shown a tool | mean confidence | max confidence | flagged |",
        "|---|---|---|---|---|",
        *[
            f"| {n} | {r['n']} | {r['mean_confidence']:.2f} | {r['max_confidence']:.2f} "
            f"| {r['flagged']:.0%} |"
            for n, r in rows
        ],
        "",
    ]


def markdown(
    reports: Mapping[str, Mapping[str, Any]],
    command: str,
    plot: str | None,
    fits: Mapping[str, Any] | None = None,
    grid: Mapping[str, Any] | None = None,
    in_set: Mapping[str, Any] | None = None,
) -> str:
    """The docs section (``in_set``: the ship check ``quality_ship.py --into`` added, which
    measured the in-set column and says whether the fit on all six is what ships)."""
    from toolscout.evaluate.table import describe_strategy, markdown_table, summary_line

    names: list[str] = []
    for report in reports.values():
        names += [n for n in report["strategies"] if n not in names]
    lines = [
        "## Retrieval quality",
        "",
        f"Reproduce with `{command}` "
        f"({time.strftime('%Y-%m-%d')}, {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}).",
        "",
        (
            'Every query goes through `Catalog.discover(k=10, tier="progressive")` with an '
            "all-scopes principal; recall@k, complete@5 (all gold in the top 5), nDCG@10 and "
            "MRR@10 come from that ranked shortlist. Latency is the wall time of one discover "
            'call; tokens@5 is the mean schema tokens of the top 5 (OpenAI format); "lost at" '
            "counts gold tools missing from the top 5 by the stage that lost them. The sets "
            "were indexed once (`--cache`), so the index times are those of an unchanged "
            "re-index; the latency columns were taken with the machine under heavy load (see "
            "Discovery latency)."
            if any("k" in r for r in reports.values())
            else "A `--fits-only` run: every query of each set goes through the product's own "
            "entitlement, retrieval and selection (`fitting.part_scores` for the parts, "
            "`fitting.recall_grid` for the held-out default: the selection "
            '`Catalog.discover(k=10, tier="progressive")` makes) with an all-scopes '
            "principal; recall@5 and complete@5 (all gold in the top 5) come from that "
            "shortlist. Such a run makes no per-set report (recall@k, latency, tokens, lost "
            "at) and no plot."
        ),
        "",
        "| strategy | what it is |",
        "|---|---|",
        *[
            f"| {n} | "
            + (
                "the held-out default reading every request whole, BM25 never leading "
                "(parts=False, lexical_lead_margin=1: what the default was before them)"
                if n == WHOLE
                else describe_strategy(n)
            )
            + " |"
            for n in names
        ],
        "",
    ]
    if fits:
        lines += [
            "### Long requests and lexical catalogs",
            "",
            "Two steps of the default act only where the request or the catalog calls for "
            "them. *Read in parts* (`discovery/parts.py`): a request of at least "
            "`parts.MIN_TERMS` distinct content terms that has several sentences or clauses "
            "is also retrieved part by part (each part its own BM25, dense search and "
            "ranker probability), and the best tool of each part the ranker is sure of "
            "(probability ≥ `parts.COVER_CONFIDENCE`) is placed right after the whole "
            "request's best; the rest keeps the whole request's order. On the dev sets "
            "that is 93% of toolbench's requests, 53% of toolalpaca's, 19–25% of "
            "apibench's, bfcl's and metatool's, none of restbench's. *The lexical lead* "
            "(`calibrate.LEAD`, `LEAD_MARGIN`): when a catalog's own pseudo-queries (made "
            "at index time from its cards, no real query) put the learned ranker's "
            "recall@5 below BM25's by more than the margin, BM25's score is added to the "
            "order; `toolscout index` then prints *leans lexical (BM25 leads the order)*, "
            "and otherwise *(the learned ranker orders)*. *The blend per catalog* (round "
            "twenty-three, not shipped): the fixed fusion's share of the order would be 4 "
            "where the catalog's own multi-tool pseudo-queries (two or three of its tools' "
            "texts joined, made from its cards) find more at 4 than at 32 by more than a "
            "margin, else 32. It is a benchmark-side screen (`benchmarks/catalog_evidence.py` "
            "since round twenty-five): the product orders every catalog at `ranker.BLEND`, "
            "and only a run with `--blend-by catalog` reads the evidence, not this one (round "
            "twenty-three: *How the default ranks*). The column *default w/o parts, "
            "no lead* is the held-out default with both off: what the default was before "
            "them, on the same queries with the same held-out constants.",
            "",
            "### Held-out figures",
            "",
            "recall@5 / complete@5 on each set. *held-out*: the ranker prior, the confidence "
            "scaling, the blend, the dedupe yield, the lexical lead's margin and the "
            "confidence model fitted on the other five sets only "
            "(leave-one-set-out); " + in_set_line(in_set) + " The goal is judged on held-out "
            "figures. "
            "The interval is the held-out default's margin over the best part on the blend "
            "grid below (the same queries, the pair the fit without the set chose), with a "
            "95% paired bootstrap interval over the queries (`fitting.paired_interval`): "
            "where it holds zero, the sample cannot tell the two apart." + lead_line(grid or {}),
            "",
            *goal_table(reports, grid),
            "",
            "Fitted constants (weights in the order of `calibrate.FEATURES`, then the "
            "none option's bias; Platt a, b; the confidence model in the order of "
            "`calibrate.CONFIDENCE_INPUTS`; the blend of the fixed fusion and the dedupe "
            "yield chosen on the grid below):",
            "",
            "| fitted without | prior | platt | confidence | blend | dedupe yield | lead margin |",
            "|---|---|---|---|---|---|---|",
            *[
                f"| {k} | {v['prior']} | {v['platt']} | {v.get('confidence')} "
                f"| {blend_cell(v)} | {v.get('dedupe_yield')} | {v.get('lead_margin')} |"
                for k, v in fits.items()
            ],
            "",
            *lead_table(grid or {}),
            "",
            *grid_table(grid or {}, fits),
            "",
            "### Confidence reliability (held-out)",
            "",
            "Held-out confidence (ranker prior, Platt step and confidence model all fitted "
            "without the set) per decile, against how often the shortlist's first tool was a "
            "gold tool. The issue's target: a gap of at most 0.1 in every decile holding at "
            "least 5% of the set's queries. ECE is the count-weighted mean gap over all "
            'deciles. What the number means and what to do with it: "Confidence" below.',
            "",
            *reliability_table(reports),
            "",
            *no_tool_table(grid or {}),
        ]
    for name, report in reports.items():
        if "k" not in report:
            continue  # made from a --fits-only run: no per-set report
        lines += [f"### {name}", "", summary_line(report) + ".", "", markdown_table(report)]
    if plot:
        lines += [f"![recall@k per strategy]({plot})", ""]
    return "\n".join(lines)


def blend_cell(fit: Mapping[str, Any]) -> str:
    """A fit's blend: one for every catalog, or each catalog's own (``--blend-by
    catalog``: the margin chosen, and the blend each set takes with it)."""
    if "blend_margin" not in fit:
        return str(fit.get("blend"))
    own = ", ".join(f"{n} {b:g}" for n, b in (fit.get("blends") or {}).items())
    return f"per catalog, margin {fit['blend_margin']:g} ({own})"


def in_set_line(in_set: Mapping[str, Any] | None) -> str:
    """What the in-set column is: the shipped constants, and whether they are this run's fit
    on all six (the ship check's verdict, ``quality_ship.verdict``)."""
    if not in_set:
        return "*in-set*: the shipped constants, fitted on all six."
    head = f"*in-set*: the shipped constants (`{in_set['command']}`, its shipped arm)."
    breaks = in_set.get("breaks") or []
    if not breaks:
        return head + " They are the fit on all six below (its row *all*)."
    return (
        head + " **They are not the fit on all six below**: measured in-set on the full "
        "sets, that fit loses more than "
        f"{in_set.get('max_loss', 0.005):g} of recall@5 or complete@5 against them on "
        + "; ".join(breaks)
        + ", so by the rule (a constant changes only when no set loses more) it does not ship "
        "as a whole (one of its constants that passes the same check alone may: see the "
        "rounds of *How the default ranks*)."
    )


def plot_recall(reports: Mapping[str, Mapping[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(reports), figsize=(6.5 * len(reports), 4.8), squeeze=False)
    for ax, (name, report) in zip(axes[0], reports.items(), strict=True):
        ks = report["k"]
        colours = plt.get_cmap("tab20")
        for i, (strategy, m) in enumerate(report["strategies"].items()):
            style = "--" if strategy in ("hybrid-cold", "hybrid-warm") else "-"
            ax.plot(
                ks,
                [m[f"recall@{k}"] for k in ks],
                style,
                color=colours(i % 20),
                linewidth=2.6 if strategy in ("hybrid", HELD_OUT) else 1.2,
                marker="o",
                ms=3,
                label=strategy,
            )
        ax.set_title(f"{name} ({report['n_scored']} queries, {report['n_tools']} tools)")
        ax.set_xlabel("k")
        ax.set_ylabel("recall@k")
        ax.set_xticks(ks)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


@contextmanager
def opened_set(
    d: Path,
    workdir: Path,
    limit: int | None,
    embedder: Any,
    *,
    index: bool = False,
    settings: Any = None,
) -> Iterator[tuple[Any, list[Any]]]:
    """A set's catalog (indexed first when ``index``; ``settings``: the catalog's own, which
    its calibration is fitted with) and its seeded, scorable queries."""
    from toolscout.discovery.catalog import Catalog
    from toolscout.evaluate.evalset import read_queries, read_tools, sample
    from toolscout.evaluate.harness import _scorable

    specs, renamed = read_tools(d / "tools.jsonl")
    with Catalog.open(
        workdir / f"{d.name}.db", embedder=embedder, log=False, settings=settings
    ) as cat:
        if index:
            cat.add(specs, replace_all=True)
        scored, _ = _scorable(cat, sample(read_queries(d / "queries.jsonl"), limit), renamed)
        yield cat, list(scored)


class Stages:
    """The heavy steps' results kept on disk (``--stages DIR``), so that a full run can be
    made in pieces (each under the heavy lock for a while; an interrupted run resumes).

    A result is found again by its step, set, query limit and a digest of what it was
    computed from (the constants of the fit it used, the grid's blends); ``None`` keeps
    nothing. The code is not part of the key: clear the directory when it changes."""

    def __init__(self, root: Path | None, limit: int | None) -> None:
        self.root, self.limit = root, limit
        if root is not None:
            root.mkdir(parents=True, exist_ok=True)

    def get(self, step: str, name: str, inputs: Any, make: Any) -> Any:
        import hashlib
        import pickle

        if self.root is None:
            return make()
        raw = json.dumps(inputs, sort_keys=True, default=str).encode()
        path = self.root / f"{step}-{name}-{self.limit}-{hashlib.sha256(raw).hexdigest()[:12]}.pkl"
        if path.exists():
            return pickle.loads(path.read_bytes())
        value = make()
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(value))
        tmp.replace(path)
        return value


def fit_constants(
    sets: Sequence[Path],
    workdir: Path,
    limit: int | None,
    embedder: Any,
    console: Any,
    blends: Sequence[float] | None = None,
    stages: Stages | None = None,
    blend_by: str = "one",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Pass 1: index every set, collect ranker examples, fit per held-out set and on all;
    also each set's blend grid (recall@5 per blend/yield pair, and its best part's).

    ``blend_by``: ``"one"`` chooses one (blend, yield) per fit (``fitting.choose_blend``);
    ``"catalog"`` chooses the margin a catalog's own blend evidence is read with, and the
    yield (``catalog_evidence.choose_blend_margin``): each set then takes its own blend
    (``catalog_evidence.catalog_blend`` of its evidence, :func:`blend_evidence`)."""
    from toolscout.evaluate.fitting import (
        choose_blend,
        examples,
        fit_platt,
        fit_prior,
        mean,
        paired_interval,
        part_scores,
        recall_grid,
    )

    stages = stages or Stages(None, limit)

    def set_examples(d: Path) -> Any:
        with opened_set(d, workdir, limit, embedder, index=True) as (cat, scored):
            return examples(cat, scored)

    by_set: dict[str, Any] = {}
    for d in sets:
        start = time.perf_counter()
        by_set[d.name] = stages.get("examples", d.name, None, lambda d=d: set_examples(d))
        console.print(
            f"{d.name}: {len(by_set[d.name])} examples ({time.perf_counter() - start:.0f}s)"
        )
    fits: dict[str, Any] = {}

    def fit_without(name: str | None) -> dict[str, Any]:
        w, b = fit_prior(by_set, name)
        a, c = fit_platt(by_set, name, w, b)
        return {"prior": [round(x, 4) for x in (*w, b)], "platt": [a, c]}

    for name in [*by_set, None]:
        # keyed by the examples' sets (the examples themselves are a stage of their own)
        fits[name or "all"] = stages.get(
            "prior", name or "all", sorted(by_set), lambda name=name: fit_without(name)
        )
    from toolscout.evaluate.fitting import BLENDS

    blends = BLENDS if blends is None else blends
    # the blend and the dedupe yield: each set's recall@5 over the grid with its held-out
    # prior, against the best of its parts; chosen per held-out set on the others only
    grids: dict[str, Any] = {}
    completes: dict[str, Any] = {}
    every_part: dict[str, Any] = {}
    parts: dict[str, list[float]] = {}

    def set_grid(d: Path) -> tuple[Any, Any, Any]:
        complete: dict[Any, list[float]] = {}
        with opened_set(d, workdir, limit, embedder) as (cat, scored):
            scores = part_scores(cat, scored)
            grid = recall_grid(cat, scored, held_settings(fits[d.name]), blends, complete=complete)
        return scores, grid, complete

    for d in sets:
        every_part[d.name], grids[d.name], completes[d.name] = stages.get(
            "grid", d.name, [fits[d.name], list(blends)], lambda d=d: set_grid(d)
        )
        # the best part: the one with the best mean recall@5 (ties: the first)
        parts[d.name] = max((v[0] for v in every_part[d.name].values()), key=mean)
        console.print(f"{d.name}: best part {mean(parts[d.name]):.3f}; blend grid done")
    evidence = blend_evidence(sets, workdir, limit, embedder) if blend_by == "catalog" else {}
    for name in [*by_set, None]:
        fit_ = fits[name or "all"]
        w, b = fit_["prior"][:-1], fit_["prior"][-1]
        if blend_by == "catalog":
            from catalog_evidence import catalog_blend, choose_blend_margin

            margin, dedupe_yield = choose_blend_margin(grids, parts, evidence, name)
            own = {n: catalog_blend(evidence[n], margin) for n in sorted(by_set)}
            fit_.update(
                blend=own.get(name or ""),
                blends=own,
                blend_margin=margin,
                dedupe_yield=dedupe_yield,
                platt=list(fit_platt(by_set, name, w, b, own)),
            )
            continue
        blend, dedupe_yield = choose_blend(grids, parts, name)
        fit_.update(
            blend=blend, dedupe_yield=dedupe_yield, platt=list(fit_platt(by_set, name, w, b, blend))
        )
    grid: dict[str, Any] = {}
    for n, g in grids.items():
        pair = (fits[n]["blend"], fits[n]["dedupe_yield"])
        margin, low, high = paired_interval(g[pair], parts[n])
        grid[n] = {
            "best_part": round(mean(parts[n]), 4),
            "held_out_margin": [round(margin, 4), round(low, 4), round(high, 4)],
            # recall@5 and complete@5 of each part and of the held-out default at its pair
            "parts": {
                k: [round(mean(r), 4), round(mean(c), 4)] for k, (r, c) in every_part[n].items()
            },
            "held_out": [round(mean(g[pair]), 4), round(mean(completes[n][pair]), 4)],
        }
        grid[n].update({f"{a:g}/{y:g}": round(mean(v), 4) for (a, y), v in g.items()})
    # the lead's margin and the held-out column with every constant of each fold, in one pass
    gaps, lead_lists = lead_evidence(sets, workdir, limit, embedder, fits, stages)
    fit_lead_margin(fits, grid, parts, gaps, lead_lists)
    console.print("lead margin: " + ", ".join(f"{k} {v['lead_margin']:g}" for k, v in fits.items()))
    # the confidence model reads each set's selections as the held-out run makes them (the
    # ranker prior fitted without that set: a catalog the prior has not seen, like a user's)
    rows: dict[str, tuple[Any, Any]] = {}
    negatives: dict[str, Any] = {}

    def set_rows(d: Path) -> tuple[tuple[Any, Any], Any]:
        with opened_set(d, workdir, limit, embedder) as (cat, scored):
            held = held_settings(fits[d.name])
            return (
                confidence_rows(cat, scored, held),
                confidence_rows(cat, no_tool_requests(cat), held)[0],
            )

    for d in sets:
        rows[d.name], negatives[d.name] = stages.get(
            "confidence", d.name, fits[d.name], lambda d=d: set_rows(d)
        )
    for name in [*by_set, None]:
        fits[name or "all"]["confidence"] = fit_confidence_without(rows, negatives, name)
    for n, x in negatives.items():
        grid[n]["no_tool"] = no_tool_summary(x, fits[n]["confidence"])
        grid[n]["reliability_held_out"] = rows_reliability(rows[n], fits[n]["confidence"])
    return fits, grid


def blend_evidence(
    sets: Sequence[Path], workdir: Path, limit: int | None, embedder: Any
) -> dict[str, dict[str, float]]:
    """Each set's blend evidence: the multi-tool pseudo-queries' recall@5 at each of
    ``catalog_evidence.BLENDS`` with the calibration's fold-0 ranker (made from the catalog's
    cards alone; empty when it is too small to calibrate): ``catalog_evidence.measure``, what
    the calibration stored as ``blend_recall`` until round twenty-five."""
    from catalog_evidence import measure

    out: dict[str, dict[str, float]] = {}
    for d in sets:
        with opened_set(d, workdir, limit, embedder) as (cat, _):
            out[d.name] = measure(cat)["blend_recall"]
    return out


def lead_evidence(
    sets: Sequence[Path],
    workdir: Path,
    limit: int | None,
    embedder: Any,
    fits: Mapping[str, Any],
    stages: Stages | None = None,
) -> tuple[dict[str, float], dict[str, Any]]:
    """Each set's own evidence for the lexical lead, and what leading does to it held out.

    The gap is the set's stored calibration's pseudo-query recall@5 of BM25 minus the
    ranker's (index time, cards only; -1 unfitted). Every set is read on the grid's
    selection path at its fold's final constants (its (blend, yield) and the Platt step
    refitted after the blend was chosen: the blend grid ran with the one fitted before),
    BM25 not leading, and each set whose gap is above the smallest of :data:`LEAD_MARGINS`
    (a set at or below it never leads, whatever the margin) BM25 leading too:
    ``{name: ((recalls, completes) without, (recalls, completes) leading)}`` (the second
    only for a set that can lead), every query's recall@5 and complete@5 (a stage of its
    own)."""
    from toolscout.discovery.calibrate import Calibration
    from toolscout.discovery.search import CALIBRATION_META
    from toolscout.evaluate.fitting import recall_grid

    gaps: dict[str, float] = {}
    lists: dict[str, Any] = {}
    for d in sets:
        with opened_set(d, workdir, limit, embedder) as (cat, scored):
            cal = Calibration.from_json(cat.store.meta(CALIBRATION_META) or "")
            pr = cal.pseudo_recall if cal is not None and cal.fitted else {}
            gaps[d.name] = pr.get("bm25", 0.0) - pr.get("ranker", 0.0) if pr else -1.0
            can_lead = gaps[d.name] > min(LEAD_MARGINS)
            pair = (fits[d.name]["blend"], fits[d.name]["dedupe_yield"])
            base = held_settings(fits[d.name])

            def read(
                cat: Any = cat,
                scored: Any = scored,
                base: Any = base,
                pair: Any = pair,
                margins: tuple[float, ...] = (1.0, -1.0) if can_lead else (1.0,),
            ) -> Any:
                out = []
                for margin in margins:  # never leads (, always leads)
                    complete: dict[Any, list[float]] = {}
                    got = recall_grid(
                        cat, scored, base.but(lexical_lead_margin=margin), [pair[0]], [pair[1]],
                        complete=complete,
                    )  # fmt: skip
                    out.append((got[pair], complete[pair]))
                return tuple(out)

            # a set that cannot lead: its own stage name (the readings hold one list)
            lists[d.name] = (stages or Stages(None, limit)).get(
                "lead-lists" if can_lead else "final-lists", d.name, [fits[d.name], list(pair)],
                read,
            )  # fmt: skip
    return gaps, lists


def fit_lead_margin(
    fits: dict[str, Any],
    grid: dict[str, Any],
    parts: Mapping[str, Sequence[float]],
    gaps: Mapping[str, float],
    lists: Mapping[str, Any],
) -> None:
    """The lexical lead's margin (``calibrate.LEAD_MARGIN``), leave-one-set-out, and each
    set's held-out default read with every constant of its fold, the lead included.

    A catalog leads when its own pseudo-queries put BM25 above the ranker by more than the
    margin (``gaps``; ``lists``: :func:`lead_evidence`'s readings of each set that can lead).
    For a held-out set, the margin of :data:`LEAD_MARGINS` with the largest mean recall@5
    over the other sets is taken, the smaller on a tie: where no other set contradicts it,
    the catalog's own evidence is followed. In the same pass each set's held-out column is
    read with every constant of its fold: the blend grid ran it with the shipped margin and
    the Platt step fitted before the blend was chosen, so each set with a reading takes its
    held-out recall@5 and complete@5 and their interval over the best part from it, at the
    lead as the fold decides (``grid[name]["held_out_lead"]`` says where that differs from
    the shipped margin's)."""
    from toolscout.discovery.ranker import LEAD_MARGIN
    from toolscout.evaluate.fitting import mean, paired_interval

    names = list(gaps)
    for n in names:
        grid[n]["lead"] = {"pseudo_gap": round(gaps[n], 3)}
        if n in lists and len(lists[n]) == 2:
            (without, _), (leading, _) = lists[n]
            grid[n]["lead"].update(
                {"recall@5 without": round(mean(without), 4),
                 "recall@5 leading": round(mean(leading), 4)}
            )  # fmt: skip

    def recall(n: str, margin: float) -> float:
        if n not in lists or len(lists[n]) < 2:
            return 0.0  # never leads at any margin of the grid: the same at every margin
        return mean(lists[n][1 if gaps[n] > margin else 0][0])

    for name in [*names, None]:
        others = [n for n in names if n != name]
        best = max(LEAD_MARGINS, key=lambda m: (round(mean([recall(n, m) for n in others]), 6), -m))
        fits[name or "all"]["lead_margin"] = best
    for n in names:
        if n not in lists:
            continue  # no reading at the final constants: the grid's stands
        leads = gaps[n] > fits[n]["lead_margin"] and len(lists[n]) == 2
        recalls, completes = lists[n][1 if leads else 0]
        m, low, high = paired_interval(recalls, parts[n])
        grid[n].update(
            held_out=[round(mean(recalls), 4), round(mean(completes), 4)],
            held_out_margin=[round(m, 4), round(low, 4), round(high, 4)],
        )
        if leads != (gaps[n] > LEAD_MARGIN):
            grid[n]["held_out_lead"] = "leading" if leads else "not leading"


@dataclass(frozen=True, slots=True)
class NoTool:
    """A request no tool of the catalog serves (what ``confidence_rows`` reads of a query)."""

    query: str
    gold: tuple[str, ...] = ()


def no_tool_requests(catalog: Any) -> list[NoTool]:
    """Requests with no right tool, written from the catalog alone: words of three unrelated
    tools shuffled together (``calibrate.pseudo_queries``' "none" kind, with another seed
    than the ranker's fit) and as many strings of random letters."""
    from toolscout.discovery.calibrate import SEED, pseudo_queries

    mixtures = [p.text for p in pseudo_queries(catalog.specs(), SEED + 1) if p.tool_id is None]
    rng = random.Random(SEED + 1)
    letters = [
        " ".join(
            "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 8)))
            for _ in range(rng.randint(1, 4))
        )
        for _ in mixtures
    ]
    return [NoTool(t) for t in mixtures + letters]


def rows_reliability(rows: tuple[Any, Any], model: Sequence[float]) -> dict[str, Any]:
    """The reliability (deciles, max gap, ECE) of a confidence model on a set's rows
    (``confidence_rows``; the queries shown nothing, confidence 0 by rule, are not among
    them)."""
    import numpy as np

    from toolscout.discovery.calibrate import sigmoid
    from toolscout.evaluate.metrics import reliability

    x, y = rows
    if not len(y):
        return {}
    conf = sigmoid(np.asarray(x) @ np.asarray(model))
    return reliability(list(zip(conf.tolist(), (y > 0.5).tolist(), strict=True)))


def no_tool_summary(x: Any, model: Sequence[float]) -> dict[str, float]:
    """The held-out confidence of a set's no-tool requests: its mean, the share flagged."""
    import numpy as np

    from toolscout.discovery.calibrate import sigmoid
    from toolscout.settings import SearchSettings

    conf = sigmoid(x @ np.asarray(model))
    threshold = SearchSettings().confidence_threshold
    return {
        "n": len(conf),
        "mean_confidence": round(float(conf.mean()), 3),
        "max_confidence": round(float(conf.max()), 3),
        "flagged": round(float((conf < threshold).mean()), 3),
    }


def shipped() -> dict[str, Any]:
    """The shipped constants the in-set default runs with (a stage's key)."""
    from toolscout.discovery import calibrate, gates, search

    return {
        "prior": calibrate.PRIOR,
        "none": calibrate.PRIOR_NONE,
        "platt": calibrate.PLATT,
        "blend": calibrate.BLEND,
        # no blend per catalog in the product (benchmarks/catalog_evidence.py): the key
        # stays, None as before, so the stages kept by earlier rounds keep their keys
        "blend_margin": None,
        "confidence": calibrate.CONFIDENCE,
        "lead_margin": calibrate.LEAD_MARGIN,
        "dedupe_yield": search.DEDUPE_YIELD,
        "gates": gates.SHIPPED,
    }


def held_settings(fit: Mapping[str, Any]) -> Any:
    """The product default with the constants of one fit (the held-out run's settings)."""
    from toolscout.settings import SearchSettings

    return SearchSettings(
        ranker_prior=tuple(fit["prior"]),
        confidence_platt=tuple(fit["platt"]),
        ranker_blend=fit.get("blend"),
        dedupe_yield=fit.get("dedupe_yield"),
        lexical_lead_margin=fit.get("lead_margin"),
    )


def shown_selections(
    catalog: Any, queries: Sequence[Any], settings: Any
) -> Iterator[tuple[Any, Any, Any, Any]]:
    """(query, parsed, entitlement, selection) for each query the product's selection shows
    a tool for, in order, with the evaluation's all-scopes principal (a query the parser
    refuses, or one with nothing shown, is left out: its confidence is 0 by rule)."""
    from toolscout.discovery import pipeline
    from toolscout.discovery.search import parse_query
    from toolscout.errors import QueryError
    from toolscout.evaluate.harness import DEPTH, eval_principal

    ent = pipeline.entitle(catalog, eval_principal(catalog))
    df, n_docs = catalog.store.document_frequency()
    for q in queries:
        try:
            parsed = parse_query(q.query, df, n_docs, settings)
        except QueryError:
            continue
        sel = pipeline.select(
            catalog, parsed, ent, k=DEPTH, fmt="openai", settings=settings,
            tier="progressive", token_budget=None,
        )  # fmt: skip
        if sel.chosen and sel.retrieval is not None:
            yield q, parsed, ent, sel


def confidence_rows(catalog: Any, queries: Sequence[Any], settings: Any) -> tuple[Any, Any]:
    """(inputs of calibrate.confidence, whether the shown top was right) per query shown a
    tool (:func:`shown_selections`)."""
    import numpy as np

    from toolscout.discovery import pipeline

    xs: list[list[float]] = []
    ys: list[float] = []
    for q, parsed, ent, sel in shown_selections(catalog, queries, settings):
        exact = pipeline.exact_mentions(catalog, parsed, ent, settings)
        xs.append(pipeline.confidence_inputs(catalog, parsed, sel.retrieval, sel.chosen, exact))
        ys.append(float(sel.chosen[0].id in q.gold))
    return np.array(xs, dtype=np.float64), np.array(ys, dtype=np.float64)


def fit_confidence_without(
    rows: Mapping[str, tuple[Any, Any]], negatives: Mapping[str, Any], held_out: str | None
) -> list[float]:
    """calibrate.CONFIDENCE fitted on every set but ``held_out``, each set weighing the same,
    with a bias per set and the median of those biases shipped (``fit_confidence(groups=)``).

    Each set's no-tool requests (``negatives``: inputs only, the outcome is always wrong)
    weigh :data:`NO_TOOL_SHARE` of the set: the dev sets have no request without a gold
    tool, and without them the model meets gibberish only in use."""
    import numpy as np

    from toolscout.discovery.calibrate import fit_confidence

    xs, ys, ws, gs = [], [], [], []
    kept = [n for n in sorted(rows) if n != held_out and len(rows[n][1])]
    for i, n in enumerate(kept):
        x, y = rows[n]
        neg = negatives.get(n)
        share = NO_TOOL_SHARE if neg is not None and len(neg) else 0.0
        xs.append(x)
        ys.append(y)
        ws.append(np.full(len(y), (1.0 - share) / len(y)))
        if share and neg is not None:
            xs.append(neg)
            ys.append(np.zeros(len(neg)))
            ws.append(np.full(len(neg), share / len(neg)))
        gs.append(np.full(len(y) + (len(neg) if share and neg is not None else 0), i))
    return list(
        fit_confidence(
            np.vstack(xs), np.concatenate(ys), np.concatenate(ws), groups=np.concatenate(gs)
        )
    )


@contextmanager
def confidence_model(model: Sequence[float]) -> Iterator[None]:
    """confidence.CONFIDENCE replaced for the duration (the held-out run's model)."""
    from toolscout.discovery import confidence

    shipped = confidence.CONFIDENCE
    confidence.CONFIDENCE = tuple(model)
    try:
        yield
    finally:
        confidence.CONFIDENCE = shipped


def write_results(path: Path, command: str, **fields: Any) -> None:
    """A benchmark's JSON: the command that made it, when, and its own fields."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"command": command, "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **fields}
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def command_line(script: str, argv: Sequence[str]) -> str:
    """The command to print for a benchmark run (``shown_args`` of its arguments)."""
    return shlex.join(["PYTHONPATH=src", ".venv/bin/python", script, *shown_args(argv)])


def shown_args(args: Sequence[str]) -> list[str]:
    """The command-line arguments worth printing: no progress flag, no cache or stages
    directory."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in ("--cache", "--stages", "--refit-cache"):
            skip = True  # its value follows
        elif a != "--no-progress" and not a.startswith(("--cache=", "--stages=", "--refit-cache=")):
            out.append(a)
    return out


def reports_from_grid(
    grid: Mapping[str, Any], in_set: Mapping[str, Sequence[float]] | None = None
) -> dict[str, dict[str, Any]]:
    """The held-out figures a --fits-only run holds (each part's and the held-out default's
    recall@5 and complete@5 at its pair, the held-out confidence's reliability), in the
    shape of the reports the tables read; ``in_set``: each set's in-set default (recall@5,
    complete@5, as ``quality_ship.py --into`` adds it), when measured."""

    def scored(pair: Sequence[float]) -> dict[str, Any]:
        return {"recall@5": pair[0], "complete@5": pair[1]}

    out: dict[str, dict[str, Any]] = {}
    for name, g in grid.items():
        strategies = {k: scored(v) for k, v in g["parts"].items()}
        strategies[HELD_OUT] = {
            **scored(g["held_out"]),
            "reliability": g.get("reliability_held_out") or {},
        }
        if in_set and name in in_set:
            strategies["hybrid"] = scored(in_set[name])
        out[name] = {"strategies": strategies}
    return out


def render(results: Path, docs: Path, plot: Path) -> int:
    """The docs section again from a finished run's JSON (tables only; nothing is re-run)."""
    try:
        doc = json.loads(results.read_text(encoding="utf-8"))
        command, fits = doc["command"], doc["fits"]
        in_set = (doc.get("in_set") or {}).get("sets")
        reports = doc["sets"] if "sets" in doc else reports_from_grid(doc["grid"], in_set)
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"error: {results} is not a quality.py result ({exc})") from exc
    # a --fits-only result draws no plot: the one on disk is another run's
    shown = os.path.relpath(plot, docs.parent) if "sets" in doc else None
    section = markdown(
        reports,
        command,
        shown,
        fits,
        doc.get("grid"),
        doc.get("in_set"),
    )
    existing = docs.read_text(encoding="utf-8") if docs.exists() else ""
    docs.write_text(splice(existing, section), encoding="utf-8")
    print(f"wrote {docs} from {results}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH, help="directory of sets")
    parser.add_argument("--limit", type=int, default=None, help="N queries per set (seeded)")
    parser.add_argument("--cache", type=Path, default=None, help="keep indexed sets here")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "recall_at_k.png")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--blends",
        type=lambda v: tuple(float(x) for x in v.split(",")),
        default=None,
        help="the blend grid, comma-separated (default: fitting.BLENDS; fewer is faster)",
    )
    parser.add_argument(
        "--stages",
        type=Path,
        default=None,
        help="keep each heavy step's result here and reuse it (resume a run made in pieces; "
        "clear it when the code changes)",
    )
    parser.add_argument(
        "--blend-by",
        choices=("one", "catalog"),
        default="one",
        help="one blend per fit, or each catalog's own from its pseudo-query evidence (the "
        "margin chosen per fit)",
    )
    parser.add_argument(
        "--fits-only",
        action="store_true",
        help="stop after the fits (write them and the grid to --json; no docs, no reports)",
    )
    parser.add_argument(
        "--no-extras",
        action="store_true",
        help="skip hybrid-no-prerequisites and hybrid-whole (a full run's two fifths less)",
    )
    parser.add_argument(
        "--render",
        action="store_true",
        help="only write the docs section again from --json (the run's own command is kept)",
    )
    args = parser.parse_args(args_list)
    if args.render:
        return render(args.json, args.docs, args.plot)

    import tempfile

    from rich.console import Console

    from toolscout.cli.eval import progress_bar
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.harness import run

    console = Console(stderr=True)
    embedder = MiniLMEmbedder()
    sets = bench_sets(args.bench)
    with tempfile.TemporaryDirectory(prefix="toolscout-quality-") as tmp:
        workdir = args.cache or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        stages = Stages(args.stages, args.limit)
        fits, grid = fit_constants(
            sets, workdir, args.limit, embedder, console, args.blends, stages, args.blend_by
        )
        if args.fits_only:
            command = command_line("benchmarks/quality.py", args_list)
            write_results(args.json, command, fits=fits, grid=grid)
            print(json.dumps({"fits": fits, "grid": grid}, indent=1))
            return 0
        reports: dict[str, dict[str, Any]] = {}
        in_set = IN_SET[:1] if args.no_extras else IN_SET
        for d in sets:
            console.print(f"[bold]{d.name}[/]")
            held = fits[d.name]
            # and the held-out default as it was before per-part retrieval and the lead
            extra = {HELD_OUT: held_settings(held)}
            if not args.no_extras:
                extra[WHOLE] = held_settings(held).but(parts=False, lexical_lead_margin=1.0)
            common: dict[str, Any] = {
                "limit": args.limit,
                "embedder": embedder,
                "db": workdir / f"{d.name}.db",
            }

            def strategies(names: Sequence[str], d: Path = d, common: Any = common) -> Any:
                with progress_bar(console, not args.no_progress) as bar:
                    return run(
                        d / "tools.jsonl", d / "queries.jsonl",
                        strategies=names, progress=bar, **common,
                    )  # fmt: skip

            def held_out(
                d: Path = d, common: Any = common, extra: Any = extra, held: Any = held
            ) -> Any:
                # the held-out run on its own, with the confidence model fitted without it
                with (
                    progress_bar(console, not args.no_progress) as bar,
                    confidence_model(held["confidence"]),
                ):
                    return run(
                        d / "tools.jsonl", d / "queries.jsonl",
                        strategies=(), progress=bar, extra=extra, **common,
                    )  # fmt: skip

            # the parts depend on no fitted constant, the in-set default on the shipped ones
            report = stages.get("parts", d.name, None, lambda: strategies(PARTS))
            for more in (
                stages.get("in-set", d.name, [shipped(), in_set], lambda: strategies(in_set)),
                stages.get("held-out", d.name, [held, sorted(extra)], held_out),
            ):
                report["strategies"].update(more["strategies"])
                report["failures"] += more["failures"]
            reports[d.name] = report
            reports[d.name]["held_out_fit"] = held

    command = command_line("benchmarks/quality.py", args_list)
    write_results(args.json, command, fits=fits, grid=grid, sets=reports)
    plot_recall(reports, args.plot)
    rel_plot = os.path.relpath(args.plot, args.docs.parent)
    existing = args.docs.read_text(encoding="utf-8") if args.docs.exists() else ""
    args.docs.parent.mkdir(parents=True, exist_ok=True)
    section = markdown(reports, command, rel_plot, fits, grid)
    args.docs.write_text(splice(existing, section), encoding="utf-8")
    print(section)
    print(f"wrote {args.docs}, {args.json}, {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
