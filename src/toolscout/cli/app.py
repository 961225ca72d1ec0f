"""The ``toolscout`` command: a thin layer that parses, calls the library, formats.

Every failure is one line on stderr naming the problem, with exit code 2.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from toolscout.errors import ToolscoutError

app = typer.Typer(
    name="toolscout",
    help="Progressive tool discovery for AI agents: entitle first, hybrid retrieval, "
    "just-in-time schemas.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="SQLite file (default: $TOOLSCOUT_DB or the user data dir)."),
]
FormatOption = Annotated[
    str,
    typer.Option(
        "--format", "-f", help="openai, openai-responses, anthropic, gemini, mcp, langchain"
    ),
]


def fail(message: str) -> typer.Exit:
    err.print(f"error: {message}", markup=False)
    return typer.Exit(code=2)


def friendly(fn: F) -> F:
    """Turn library errors into one-line messages and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ToolscoutError as exc:
            raise fail(str(exc)) from None
        except OSError as exc:
            raise fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")) from None
        except KeyboardInterrupt:
            raise fail("interrupted") from None

    return wrapper  # type: ignore[return-value]


def _db(db: Path | None) -> Path:
    from toolscout.settings import default_db_path

    return db if db is not None else default_db_path()


def _open(db: Path | None, *, must_exist: bool = True) -> Any:
    from toolscout.discovery.catalog import Catalog

    path = _db(db)
    if must_exist and not path.exists():
        raise fail(f"no catalog at {path}; run `toolscout index CATALOG --db {path}` first")
    return Catalog.open(path)


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


@app.command()
@friendly
def index(
    catalog_paths: Annotated[
        list[Path], typer.Argument(metavar="CATALOG...", help="tools.jsonl, card YAML/JSON or dirs")
    ],
    db: DbOption = None,
    replace: Annotated[bool, typer.Option(help="Remove stored tools not in these files.")] = False,
    policy: Annotated[
        Path | None,
        typer.Option(help="Policy YAML (roles, admin_scope) to store with the catalog."),
    ] = None,
) -> None:
    """Validate and index catalogs (one transaction; unchanged tools are not re-embedded)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from toolscout.loader import read_catalog, read_policy

    specs = read_catalog(catalog_paths)
    pol = read_policy(policy) if policy else _policy_beside(catalog_paths)
    catalog = _open(db, must_exist=False)
    with (
        catalog,
        Progress(
            TextColumn("embedding"), BarColumn(), MofNCompleteColumn(), console=err, transient=True
        ) as bar,
    ):
        task = bar.add_task("embed", total=None)
        report = catalog.add(
            specs,
            replace_all=replace,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
        if pol is not None:
            catalog.set_policy(pol)
    s = report.stats
    out.print(
        f"indexed {len(specs)} tools into {_db(db)}: {s.added} added, {s.updated} updated, "
        f"{s.unchanged} unchanged, {s.removed} removed; {s.embedded} texts embedded "
        f"in {report.seconds:.1f}s",
        markup=False,
    )
    for warning in report.warnings[:20]:
        err.print(f"warning: {warning}", markup=False)


def _policy_beside(paths: Sequence[Path]) -> Any:
    from toolscout.loader import read_policy

    for p in paths:
        candidate = (p if p.is_dir() else p.parent) / "policy.yaml"
        if candidate.is_file():
            return read_policy(candidate)
    return None


@app.command()
@friendly
def search(
    query: Annotated[str, typer.Argument(help="What the user asked.")],
    db: DbOption = None,
    scopes: Annotated[
        str | None, typer.Option(help="Comma-separated scopes, e.g. billing:*,orders:read")
    ] = None,
    tenant: Annotated[str, typer.Option(help="The caller's tenant.")] = "",
    roles: Annotated[
        str | None, typer.Option(help="Comma-separated roles (mapped to scopes by policy).")
    ] = None,
    subject: Annotated[str, typer.Option(help="The caller's subject, for the log.")] = "cli",
    k: Annotated[int, typer.Option("-k", help="Shortlist size, 1-10.")] = 3,
    fmt: FormatOption = "openai",
    tier: Annotated[
        str | None, typer.Option(help="Force the tier: all, groups or progressive.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Shortlist the tools a principal may use for a query, with their schemas."""
    from toolscout.policy import Principal

    principal = Principal.of(subject, tenant, _split(scopes), _split(roles))
    with _open(db) as catalog:
        result = catalog.discover(query, principal, k=k, fmt=fmt, tier=tier)
    if as_json:
        data = result.to_dict()
        out.print(json.dumps(data, indent=2, ensure_ascii=False), markup=False)
        return
    _print_shortlist(result)


def _print_shortlist(result: Any) -> None:
    table = Table(show_edge=False, pad_edge=False)
    for col in ("#", "tool", "score", "lexical", "dense", "note"):
        table.add_column(
            col, justify="right" if col in ("#", "score", "lexical", "dense") else "left"
        )
    for i, t in enumerate(result.tools, 1):
        table.add_row(
            str(i),
            t.id,
            f"{t.score:.3f}",
            f"{t.lexical:.3f}",
            f"{t.dense:.3f}",
            f"named in query ({t.exact})" if t.exact else "",
        )
    out.print(table)
    conf = f"confidence {result.confidence:.2f}" + (" (LOW)" if result.low_confidence else "")
    out.print(
        f"tier {result.tier.value} · {conf} · {result.filtered_by_policy} tools filtered by policy"
        f" · tokens injected {result.tokens.injected} vs {result.tokens.catalog} for the whole "
        f"entitled catalog ({result.tokens.saved} saved)",
        markup=False,
    )
    if result.reformulations:
        out.print("reformulated: " + "; ".join(result.reformulations), markup=False)


@app.command()
@friendly
def schema(
    tool_id: Annotated[str, typer.Argument(help="The tool id.")],
    db: DbOption = None,
    fmt: FormatOption = "openai",
) -> None:
    """Print one tool's schema rendered for a model API."""
    with _open(db) as catalog:
        rendered = catalog.schema(tool_id, fmt)
    out.print(json.dumps(rendered, indent=2, ensure_ascii=False), markup=False)


@app.command()
@friendly
def demo(
    db: Annotated[
        Path | None, typer.Option("--db", help="Where to build the demo database.")
    ] = None,
    k: Annotated[int, typer.Option("-k", help="Shortlist size.")] = 3,
) -> None:
    """Index the bundled catalog and run scripted requests for several principals."""
    from toolscout.cli.demo import run_demo

    run_demo(db, k=k, console=out)


def _register_modules() -> None:
    """Mount the commands that live in their own modules."""
    from toolscout.cli.eval import eval_command
    from toolscout.cli.gateway import audit, call, token_app

    app.command("eval")(friendly(eval_command))
    app.command("call")(friendly(call))
    app.add_typer(token_app, name="token", help="Development tokens.")
    app.command("audit")(friendly(audit))
    from toolscout.cli.serve import serve

    app.command("serve")(friendly(serve))
    from toolscout.cli.mcp import mcp_app

    app.add_typer(mcp_app, name="mcp", help="The MCP gateway: serve, inspect.")


_register_modules()


def main(argv: Sequence[str] | None = None) -> None:
    app(args=list(argv) if argv is not None else None, prog_name="toolscout")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
