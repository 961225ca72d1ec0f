"""``toolscout eval``: recall, nDCG, MRR, latency and tokens for strategies side by side.

A thin surface over :func:`toolscout.evaluate.harness.run`: it parses options, shows a
progress bar on stderr, and prints a table (or, with ``--json``, one JSON
object on stdout). Errors are one line on stderr with exit code 2.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from toolscout.errors import ToolscoutError

if TYPE_CHECKING:  # the harness (numpy, the store...) loads only when the command runs
    from toolscout.evaluate.harness import ProgressFn


@contextmanager
def progress_bar(console: Console, enabled: bool = True) -> Iterator[ProgressFn | None]:
    """A rich progress bar (one line per stage) as a :data:`ProgressFn`; None when disabled."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("{task.description:<22}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def update(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(label, total=total or None)
            bar.update(tasks[label], completed=done, total=total or None)

        yield update


def _print_table(console: Console, report: Mapping[str, Any]) -> None:
    """Two tables, quality then cost, so each fits a terminal."""
    from rich.table import Table

    from toolscout.evaluate.table import summary_line, table_rows

    header, rows = table_rows(report)
    cut = header.index("low conf") + 1
    for cols in (list(range(cut)), [0, *range(cut, len(header))]):
        table = Table(show_edge=False, pad_edge=False)
        for i in cols:
            left = header[i] in ("strategy", "lost at")
            table.add_column(header[i], justify="left" if left else "right", no_wrap=i == 0)
        for row in rows:
            table.add_row(*[row[i] for i in cols])
        console.print(table)
        console.print()
    console.print(summary_line(report), markup=False)


def _print_failures(console: Console, failures: list[dict[str, Any]]) -> None:
    from toolscout.evaluate.harness import FAILURE_K

    if not failures:
        return
    console.print(f"\nfailures (a gold tool outside the top {FAILURE_K}):", markup=False)
    for f in failures:
        gold = ", ".join(
            f"{g} (lost at {f['lost_at'][g]})" if g in f["lost_at"] else g for g in f["gold"]
        )
        console.print(f"[{f['strategy']}] {f['id']}: {f['query']}", markup=False)
        console.print(f"    gold:     {gold}", markup=False)
        console.print(f"    returned: {', '.join(f['returned']) or '(nothing)'}", markup=False)


def eval_command(
    tools: Annotated[
        Path,
        typer.Option(
            "--tools", help="tools.jsonl: id, name, description, parameters, source, group."
        ),
    ],
    queries: Annotated[
        Path, typer.Option("--queries", help="queries.jsonl: id, query, gold, source.")
    ],
    k: Annotated[
        str, typer.Option("--k", help="Comma-separated cut-offs for recall@k (1-10).")
    ] = "1,3,5,10",
    strategy: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy",
            "-s",
            help="Strategy to run (repeatable): naive, bm25, dense, hybrid, hybrid-rrf, "
            "hybrid-fixed, hybrid-weighted, hybrid-intents, hybrid-no-exact, "
            "hybrid-no-reformulate, hybrid-no-dedupe, hybrid-cold, hybrid-warm, or all. "
            "Default: naive, bm25, dense, hybrid.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Also write the JSON report here.")
    ] = None,
    db: Annotated[
        Path | None,
        typer.Option("--db", help="Index into this SQLite file (default: a throw-away one)."),
    ] = None,
    warm: Annotated[
        bool,
        typer.Option("--warm", help="Also measure learned aliases: hybrid-cold vs hybrid-warm."),
    ] = False,
    failures: Annotated[
        int, typer.Option("--failures", min=0, help="List up to N failing queries per strategy.")
    ] = 0,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Only N queries (seeded sample).")
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on stderr.")] = True,
    embedder: Annotated[
        str | None,
        typer.Option(
            help="Embedding model: all-MiniLM-L6-v2 (the default) or multilingual-e5-small."
        ),
    ] = None,
) -> None:
    """Measure discovery quality over a tools.jsonl + queries.jsonl, strategy by strategy."""
    from toolscout.embed import make_embedder
    from toolscout.evaluate.harness import DEFAULT_STRATEGIES, run

    stdout = Console(highlight=False, soft_wrap=True)
    if not stdout.is_terminal:
        stdout.width = 160
    stderr = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        with progress_bar(stderr, progress) as bar:
            report = run(
                tools,
                queries,
                strategies=strategy or DEFAULT_STRATEGIES,
                ks=k,
                db=db,
                warm=warm,
                failures=failures,
                limit=limit,
                progress=bar,
                embedder=make_embedder(embedder) if embedder is not None else None,
            )
    except ToolscoutError as exc:
        stderr.print(f"error: {exc}", markup=False)
        raise typer.Exit(code=2) from None
    text = json.dumps(report, indent=2, ensure_ascii=False)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
    if as_json:
        typer.echo(text)
        return
    _print_table(stdout, report)
    for old, new in report["renamed_ids"].items():
        stderr.print(
            f"warning: tool id {old!r} is not a valid card id; evaluated as {new!r}", markup=False
        )
    _print_failures(stdout, report["failures"])
