"""CLI surface of the gateway: ``toolscout token issue`` and ``toolscout audit``.

The main CLI mounts :data:`token_app` as ``token`` and registers :func:`audit`
as the ``audit`` command. Errors print one line on stderr and exit with code 2;
``audit --verify`` exits with 1 when the chain is broken.
"""

from __future__ import annotations

import json as _json
import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from toolscout.errors import ToolscoutError

if TYPE_CHECKING:
    from rich.text import Text

    from toolscout.gateway.audit import AuditRecord
    from toolscout.gateway.audit_verify import Head

token_app = typer.Typer(help="Mint development tokens.", no_args_is_help=True, add_completion=False)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``15m``, ``2h``, ``1d`` or ``1w``."""
    m = _DURATION.match(text.lower())
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 15m, 2h, 1d)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_since(text: str, *, now: float | None = None) -> float:
    """A timestamp from a duration back from now (``15m``) or an ISO date/time."""
    try:
        return (time.time() if now is None else now) - parse_duration(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"not a duration or ISO date/time: {text!r}") from None
    return (moment if moment.tzinfo else moment.astimezone()).timestamp()


def parse_arguments(text: str) -> dict[str, object]:
    """``--args``: a JSON object; NaN/Infinity and runaway nesting are refused here already."""
    from toolscout.schemas import check_arguments

    def no_constant(name: str) -> object:
        raise ValueError(f"{name} is not a JSON number (non-finite numbers are refused)")

    try:
        value = _json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise ValueError("--args nests too deeply") from None
    except ValueError as exc:
        raise ValueError(f"--args is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"--args must be a JSON object, got {type(value).__name__}")
    try:
        check_arguments(value)
    except ToolscoutError as exc:
        raise ValueError(f"--args: {exc}") from None
    return value


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _split(values: str | None) -> list[str]:
    return [v.strip() for v in (values or "").split(",") if v.strip()]


@token_app.command("issue")
def issue(
    sub: Annotated[str, typer.Option("--sub", help="Subject (user or agent id).")],
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant the subject acts for.")] = "",
    scopes: Annotated[str, typer.Option("--scopes", help="Comma-separated scopes.")] = "",
    roles: Annotated[str, typer.Option("--roles", help="Comma-separated roles.")] = "",
    ttl: Annotated[str, typer.Option("--ttl", help="Lifetime, e.g. 15m, 1h.")] = "15m",
    key: Annotated[
        str | None,
        typer.Option("--key", envvar="TOOLSCOUT_TOKEN_KEY", help="HMAC secret (>= 32 bytes)."),
    ] = None,
    key_file: Annotated[
        Path | None,
        typer.Option("--key-file", help="PEM private key (RS256/ES256) or secret file."),
    ] = None,
    alg: Annotated[str, typer.Option("--alg", help="HS256, RS256 or ES256.")] = "HS256",
    iss: Annotated[str | None, typer.Option("--iss", help="Issuer claim.")] = None,
    aud: Annotated[str | None, typer.Option("--aud", help="Audience claim.")] = None,
    kid: Annotated[str | None, typer.Option("--kid", help="Key id header.")] = None,
) -> None:
    """Print a signed JWT for development and tests."""
    from toolscout.gateway.auth import issue_token

    if (key is None) == (key_file is None):
        _fail("give exactly one of --key (or $TOOLSCOUT_TOKEN_KEY) and --key-file")
    try:
        seconds = parse_duration(ttl)
        secret: str | bytes
        if key_file is not None:
            try:
                secret = key_file.read_bytes()
            except OSError as exc:
                _fail(f"cannot read {key_file}: {exc.strerror or exc}")
            if alg.upper().startswith("HS"):
                secret = secret.strip()
        else:
            assert key is not None
            secret = key
        token = issue_token(
            subject=sub,
            tenant=tenant,
            scopes=_split(scopes),
            roles=_split(roles),
            key=secret,
            algorithm=alg.upper() if alg.lower() != "eddsa" else "EdDSA",
            ttl_seconds=seconds,
            issuer=iss,
            audience=aud,
            kid=kid,
        )
    except (ToolscoutError, ValueError) as exc:
        _fail(str(exc))
    typer.echo(token)


def audit(
    since: Annotated[
        str | None, typer.Option("--since", help="Records since a duration ago (15m) or ISO time.")
    ] = None,
    subject: Annotated[str | None, typer.Option("--subject", help="Only this subject.")] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Verify the hash chain.")] = False,
    head: Annotated[
        bool, typer.Option("--head", help="Print the head (COUNT:HASH) to keep elsewhere.")
    ] = False,
    expect_head: Annotated[
        str | None,
        typer.Option("--expect-head", help="With --verify: a head exported earlier (COUNT:HASH)."),
    ] = None,
    key: Annotated[
        str | None,
        typer.Option(
            "--key", envvar="TOOLSCOUT_AUDIT_KEY", help="The audit log's HMAC key (>= 16 bytes)."
        ),
    ] = None,
    db: Annotated[
        str | None, typer.Option("--db", help="Catalog database file or postgresql:// DSN.")
    ] = None,
    audit_db: Annotated[
        str | None,
        typer.Option(
            "--audit-db",
            help="Audit log file or postgresql:// DSN (default: DB's .audit.db, else DB).",
        ),
    ] = None,
    mcp_config: Annotated[
        Path | None,
        typer.Option(
            "--mcp-config",
            help="The MCP gateway's config file: read that gateway's audit log (and its key).",
        ),
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    limit: Annotated[int, typer.Option("--limit", help="Show at most this many records.")] = 100,
) -> None:
    """Show the execution audit log; --verify checks it has not been tampered with.

    Reads the file read-only. --verify exits 1 when the chain is broken, the
    table or its append-only triggers are missing, the key does not match, or
    the log disagrees with --expect-head.
    """
    from toolscout.gateway.audit import audit_path_for
    from toolscout.gateway.audit_verify import Head, read_file, verify_file
    from toolscout.settings import default_db_path
    from toolscout.stores.dsn import is_dsn

    if mcp_config is not None:
        from toolscout.mcp.config import load_config

        if audit_db is not None or db is not None:
            _fail("--mcp-config names the audit log already; drop --db and --audit-db")
        try:
            gateway_cfg = load_config(mcp_config)
        except ToolscoutError as exc:
            _fail(str(exc))
        audit_db = gateway_cfg.audit_path()
        key = key if key is not None else gateway_cfg.audit_key
    # a log in PostgreSQL: named by --audit-db, or the catalog's own database
    dsn = audit_db if is_dsn(audit_db) else (db if audit_db is None and is_dsn(db) else None)
    if audit_db is not None:
        path = Path(audit_db)
    else:
        catalog = Path(db) if db else default_db_path()
        own = audit_path_for(catalog)
        path = own if own.is_file() else catalog
    if expect_head is not None and not verify:
        _fail("--expect-head needs --verify")
    try:
        cutoff = parse_since(since) if since else None
        expected = Head.parse(expect_head) if expect_head is not None else None
    except (ValueError, ToolscoutError) as exc:
        _fail(str(exc))
    if verify or head:
        try:
            if dsn is not None:
                from toolscout.gateway.audit_pg import verify_database

                result = verify_database(dsn, key=key, expected_head=expected)
            else:
                result = verify_file(path, key=key, expected_head=expected)
        except ToolscoutError as exc:
            _fail(str(exc))
        if head and not verify:
            if dsn is None and not path.is_file():
                _fail(f"no audit log at {path}")
            typer.echo(_json.dumps({"head": result.head}) if json else result.head)
            return
        if json:
            typer.echo(_json.dumps(result.to_dict()))
        elif result.ok and result.keyed:
            typer.echo(f"audit log intact: {result.count} records verified (head {result.head})")
        elif result.ok:
            typer.echo(_unkeyed_verdict(result.count, result.head, expected))
        elif result.first_bad_id is not None and "chain breaks" in result.problem:
            typer.echo(
                f"audit log TAMPERED: chain breaks at record {result.first_bad_id} "
                f"({result.count} records)"
            )
        else:
            typer.echo(f"audit log NOT VERIFIED: {result.problem}")
        if not result.ok:
            raise typer.Exit(1)
        return
    if dsn is None and not path.is_file():
        _fail(f"no database at {path}")
    try:
        if dsn is not None:
            from toolscout.gateway.audit_pg import read_database

            records = read_database(dsn, cutoff, subject, max(limit, 0) or None)
        else:
            records = read_file(path, since=cutoff, subject=subject, limit=max(limit, 0) or None)
    except ToolscoutError as exc:
        _fail(str(exc))
    if json:
        for rec in records:
            typer.echo(_json.dumps(rec.to_dict(), ensure_ascii=False))
        return
    _print_table(records)


def _unkeyed_verdict(count: int, head: str, expected: Head | None) -> str:
    """What a consistent chain without a key proves: nothing beyond an exported head."""
    why = (
        "an unkeyed chain cannot prove integrity: anyone who can write the file can rewrite "
        "it and recompute every hash"
    )
    if expected is not None and expected.count >= count > 0:
        return (
            f"audit log intact up to the exported head: its {count} records match it "
            "(the log is unkeyed: records added after this head can only be proven against "
            "a later exported head)"
        )
    if expected is not None and expected.count > 0:
        return (
            f"audit log UNKEYED: the first {expected.count} of {count} records match the "
            f"exported head; the {count - expected.count} after it cannot be proven ({why}). "
            "Key the log with TOOLSCOUT_AUDIT_KEY."
        )
    return (
        f"audit log UNKEYED: the chain of {count} records is consistent (head {head}), but "
        f"{why}. Key the log with TOOLSCOUT_AUDIT_KEY, or compare it against a head kept "
        "elsewhere (--head, --expect-head)."
    )


def _safe(text: str) -> Text:
    """Caller-controlled text, shown literally: no markup, no control characters."""
    from rich.text import Text

    return Text("".join(c if c.isprintable() else repr(c)[1:-1] for c in text) or "-")


def _print_table(records: list[AuditRecord]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    cols = ("id", "time", "subject", "tenant", "tool", "kind", "decision", "reason", "ms", "status")
    for col in cols:
        table.add_column(col, justify="right" if col in ("id", "ms") else "left")
    for rec in records:
        style = {"allowed": "green", "denied": "red", "error": "yellow"}.get(rec.decision, "")
        table.add_row(
            str(rec.id),
            rec.when.strftime("%Y-%m-%d %H:%M:%S"),
            _safe(rec.subject),
            _safe(rec.tenant),
            _safe(rec.tool_id),
            rec.kind if rec.kind != "outcome" else f"outcome of {rec.ref}",
            f"[{style}]{rec.decision}[/]" if style else rec.decision,
            _safe(rec.reason),
            f"{rec.latency_ms:.2f}",
            _safe(rec.status),
        )
    Console(file=sys.stdout, width=160).print(table)


def call(
    tool_id: Annotated[str, typer.Argument(help="The tool to run.")],
    token: Annotated[
        str, typer.Option("--token", envvar="TOOLSCOUT_TOKEN", help="The caller's JWT.")
    ],
    args: Annotated[str, typer.Option("--args", help="Arguments as a JSON object.")] = "{}",
    db: Annotated[Path | None, typer.Option("--db", help="Database file.")] = None,
    key: Annotated[
        str | None,
        typer.Option("--key", envvar="TOOLSCOUT_TOKEN_KEY", help="HMAC secret to verify with."),
    ] = None,
    key_file: Annotated[
        Path | None, typer.Option("--key-file", help="PEM public key (RS256/ES256).")
    ] = None,
    jwks: Annotated[Path | None, typer.Option("--jwks", help="Local JWKS file.")] = None,
    alg: Annotated[
        str,
        typer.Option(
            "--alg", help="Allowed algorithm: HS256/384/512, RS*, PS*, ES256/384/512 or EdDSA."
        ),
    ] = "HS256",
    iss: Annotated[str | None, typer.Option("--iss", help="Required issuer.")] = None,
    aud: Annotated[str | None, typer.Option("--aud", help="Required audience.")] = None,
    grant: Annotated[
        str | None, typer.Option("--grant", help="Discovery grant (strict mode).")
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run/--no-dry-run",
            help="Bind every tool to a dry-run executor that echoes the allowed call.",
        ),
    ] = True,
) -> None:
    """Run one tool call through the gateway: token, policy, schema, audit.

    A refusal prints ``refused: <reason>: <message>`` on stderr and exits with 3;
    the attempt is in the audit log either way.
    """
    from toolscout.executors.base import DryRunExecutor
    from toolscout.gateway.auth import JWTVerifier
    from toolscout.service import Toolscout
    from toolscout.settings import Settings, default_db_path

    path = db if db is not None else default_db_path()
    if not path.exists():
        _fail(f"no catalog at {path}; run `toolscout index CATALOG --db {path}` first")
    given = [k for k in (key, key_file, jwks) if k is not None]
    if len(given) != 1:
        _fail("give exactly one of --key (or $TOOLSCOUT_TOKEN_KEY), --key-file and --jwks")
    try:
        secret: str | bytes | None = key
        if key_file is not None:
            secret = key_file.read_bytes()
        verifier = JWTVerifier(key=secret, jwks=jwks, algorithms=(alg,), issuer=iss, audience=aud)
    except OSError as exc:
        _fail(f"cannot read {exc.filename}: {exc.strerror or exc}")
    except ToolscoutError as exc:
        _fail(str(exc))
    try:
        arguments = parse_arguments(args)
    except ValueError as exc:
        _fail(str(exc))
    executors = {"*": DryRunExecutor()} if dry_run else {}
    import os

    # the audit chain's HMAC key, when the deployment keys it (as `toolscout audit` does)
    # no query is asked: the encoder is not loaded ahead (the process would wait for it)
    settings = Settings(
        db=path,
        log=False,
        audit_key=os.environ.get("TOOLSCOUT_AUDIT_KEY"),
        prefetch_models=False,
    )
    # the tool may be named as the model saw it in any format, or by its id
    try:
        with Toolscout.open(settings, verifier=verifier, executors=executors) as service:
            result = service.execute(token, tool_id, arguments, grant=grant)
    except ToolscoutError as exc:  # a catalog or audit log that cannot be opened, a wrong key
        _fail(str(exc))
    if not result.ok:
        typer.echo(f"{result.status}: {result.reason}: {result.message}", err=True)
        raise typer.Exit(3)
    out = {
        "tool": result.tool_id,
        "subject": result.principal.subject if result.principal is not None else "",
        "value": result.value,
        "audit_id": result.audit_id,
        "overhead_ms": round(result.overhead_ms, 3),
    }
    typer.echo(_json.dumps(out, default=str))
