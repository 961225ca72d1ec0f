"""Retrieval quality of every strategy, warm run included, over every evaluation set.

A set is a directory holding ``tools.jsonl`` and ``queries.jsonl`` (default: every
one under ``../shared/bench/``). Writes:

- ``docs/benchmarks.md``: the tables, between ``<!-- quality:start -->`` and
  ``<!-- quality:end -->`` (the rest of the file is kept; created if missing),
  with the command that reproduces them;
- ``benchmarks/results/quality.json``: every report, as ``toolscout eval --json`` prints it;
- ``docs/recall_at_k.png``: recall@k per strategy, one subplot per set.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/quality.py [--bench DIR] [--limit N]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BENCH = ROOT.parent / "shared" / "bench"
START, END = "<!-- quality:start -->", "<!-- quality:end -->"


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


def markdown(reports: Mapping[str, Mapping[str, Any]], command: str, plot: str | None) -> str:
    from toolscout.evaluate.harness import describe_strategy, markdown_table, summary_line

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
        'Every query goes through `Catalog.discover(k=10, tier="progressive")` with an '
        "all-scopes principal; recall@k, complete@5 (all gold in the top 5), nDCG@10 and MRR@10 "
        "come from that ranked shortlist. Latency is the wall time of one discover call; "
        'tokens@5 is the mean schema tokens of the top 5 (OpenAI format); "lost at" counts '
        "gold tools missing from the top 5 by the stage that lost them. hybrid-cold and "
        "hybrid-warm are scored on the held-out half of the queries only.",
        "",
        "| strategy | what it is |",
        "|---|---|",
        *[f"| {n} | {describe_strategy(n)} |" for n in names],
        "",
    ]
    for name, report in reports.items():
        lines += [f"### {name}", "", summary_line(report) + ".", "", markdown_table(report)]
    if plot:
        lines += [f"![recall@k per strategy]({plot})", ""]
    return "\n".join(lines)


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
                linewidth=2.6 if strategy == "hybrid" else 1.2,
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


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH, help="directory of sets")
    parser.add_argument("--limit", type=int, default=None, help="N queries per set (seeded)")
    parser.add_argument("--strategy", action="append", help="strategies (default: all + warm)")
    parser.add_argument("--no-warm", action="store_true", help="skip hybrid-cold/hybrid-warm")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/quality.json")
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "recall_at_k.png")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(args_list)

    from rich.console import Console

    from toolscout.cli.eval import progress_bar
    from toolscout.embed.minilm import MiniLMEmbedder
    from toolscout.evaluate.harness import run

    console = Console(stderr=True)
    embedder = MiniLMEmbedder()
    reports: dict[str, dict[str, Any]] = {}
    for d in bench_sets(args.bench):
        console.print(f"[bold]{d.name}[/]")
        with progress_bar(console, not args.no_progress) as bar:
            reports[d.name] = run(
                d / "tools.jsonl",
                d / "queries.jsonl",
                strategies=args.strategy or ["all"],
                warm=not args.no_warm,
                limit=args.limit,
                embedder=embedder,
                progress=bar,
            )

    shown = [a for a in args_list if a != "--no-progress"]  # does not change the numbers
    command = shlex.join(["PYTHONPATH=src", ".venv/bin/python", "benchmarks/quality.py", *shown])
    args.json.parent.mkdir(parents=True, exist_ok=True)
    doc = {"command": command, "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "sets": reports}
    args.json.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    plot_recall(reports, args.plot)
    rel_plot = os.path.relpath(args.plot, args.docs.parent)
    existing = args.docs.read_text(encoding="utf-8") if args.docs.exists() else ""
    args.docs.parent.mkdir(parents=True, exist_ok=True)
    args.docs.write_text(splice(existing, markdown(reports, command, rel_plot)), encoding="utf-8")
    for name, report in reports.items():
        from toolscout.evaluate.harness import markdown_table

        print(f"## {name}\n\n{markdown_table(report)}")
    print(f"wrote {args.docs}, {args.json}, {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
