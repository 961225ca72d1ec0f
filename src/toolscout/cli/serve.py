"""``toolscout serve``: the HTTP API under uvicorn.

The command checks its options, puts them in the environment and starts uvicorn
with an application *factory* (:func:`app_from_environment`), so that each of
``--workers N`` processes opens its own ``Toolscout`` on the same SQLite file or
PostgreSQL database.

Secrets come from files or the environment, never argv by preference (a command
line is visible to every user in ``/proc/*/cmdline``): the token key from
``--jwt-key-file`` or ``$TOOLSCOUT_TOKEN_KEY`` (``--jwt-key`` still works, with a
warning), the audit chain's key from ``--audit-key-file`` or
``$TOOLSCOUT_AUDIT_KEY``. The audit key is its own secret, never the token key:
whoever can mint tokens must not be able to re-sign the evidence.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from toolscout.errors import ConfigError, MissingExtraError
from toolscout.stores.dsn import is_dsn

ENV_DB = "TOOLSCOUT_SERVE_DB"
#: the token key as the user gives it (``TOOLSCOUT_JWT_KEY`` is the older spelling)
ENV_TOKEN_KEY = "TOOLSCOUT_TOKEN_KEY"
ENV_JWT_KEY = "TOOLSCOUT_JWT_KEY"
ENV_AUDIT_KEY = "TOOLSCOUT_AUDIT_KEY"
ENV_JWT_ISSUER = "TOOLSCOUT_SERVE_JWT_ISSUER"
ENV_JWT_AUDIENCE = "TOOLSCOUT_SERVE_JWT_AUDIENCE"
ENV_MAX_BODY = "TOOLSCOUT_MAX_BODY"
ENV_AUDIT = "TOOLSCOUT_SERVE_AUDIT"
ENV_DRY_RUN = "TOOLSCOUT_SERVE_DRY_RUN"
ENV_URL = "TOOLSCOUT_SERVE_URL"
ENV_ACCESS_LOG = "TOOLSCOUT_SERVE_ACCESS_LOG"


def build_service(
    target: str,
    *,
    jwt_key: str,
    audit_key: str | None = None,
    audit: str | None = None,
    dry_run: bool = False,
    jwt_issuer: str | None = None,
    jwt_audience: str | None = None,
) -> Any:
    """A ``Toolscout`` over ``target`` (a SQLite path or a PostgreSQL DSN).

    ``audit_key`` keys the audit chain; ``None`` leaves it unkeyed (it is never the
    token key)."""
    from toolscout import DryRunExecutor, Settings, Toolscout
    from toolscout.discovery.catalog import stored_embedder
    from toolscout.embed import server_embedder
    from toolscout.stores import open_store

    settings = Settings(
        db=target,
        jwt_key=jwt_key,
        jwt_issuer=jwt_issuer or None,
        jwt_audience=jwt_audience or None,
        audit_key=audit_key or None,
        audit_path=audit or None,
    )
    # the model the catalog was indexed with; a server encodes many requests at once: no
    # ONNX Runtime spin-waiting (embed/minilm.py), concurrent requests' texts share encoder
    # runs (embed/coalesce.py), requests may have their own graph (embed/queries.py)
    store = open_store(settings.catalog_target())
    try:
        embedder = server_embedder(stored_embedder(store, spin_wait=False))
    finally:
        store.close()
    return Toolscout.open(
        settings, executors=DryRunExecutor() if dry_run else None, embedder=embedder
    )


def app_from_environment() -> Any:
    """The uvicorn factory: one ``Toolscout`` and app per worker process, from the environment."""
    from toolscout.http.app import MAX_BODY, create_app

    target = os.environ.get(ENV_DB, "")
    key = os.environ.get(ENV_JWT_KEY, "")
    if not target or not key:
        raise ConfigError(f"{ENV_DB} and {ENV_JWT_KEY} must be set")
    service = build_service(
        target,
        jwt_key=key,
        audit_key=os.environ.get(ENV_AUDIT_KEY),
        audit=os.environ.get(ENV_AUDIT),
        dry_run=os.environ.get(ENV_DRY_RUN) == "1",
        jwt_issuer=os.environ.get(ENV_JWT_ISSUER),
        jwt_audience=os.environ.get(ENV_JWT_AUDIENCE),
    )
    max_body = int(os.environ.get(ENV_MAX_BODY, str(MAX_BODY)))

    def announce(readiness: Any) -> None:
        print(startup_line(service, target, readiness.seconds), file=sys.stderr, flush=True)

    return create_app(service, max_body=max_body, close_on_shutdown=True, on_ready=announce)


def startup_line(service: Any, target: str, warm_s: float | None) -> str:
    """The one line a worker prints once it is warm: where, what, from which store."""
    from toolscout.stores.dsn import redact

    store = "PostgreSQL" if is_dsn(target) else "SQLite"
    audit = service.settings.audit_target()
    audit_text = redact(str(audit)) if is_dsn(str(audit)) else str(audit)
    keyed = "keyed" if getattr(service.audit, "keyed", False) else "UNKEYED"
    warm = f", warm in {warm_s:.1f} s" if warm_s is not None else ""
    url = os.environ.get(ENV_URL, "")
    return (
        f"toolscout serve: worker {os.getpid()} ready on {url or '(unknown address)'} — "
        f"catalog {redact(target) if is_dsn(target) else target} ({store}, "
        f"{len(service.catalog)} tools), audit {audit_text} ({keyed}){warm}"
    )


def uvicorn_options() -> dict[str, Any]:
    """The options every worker runs uvicorn with (the access log when asked for)."""
    if os.environ.get(ENV_ACCESS_LOG) == "1":
        return {**UVICORN_OPTIONS, "access_log": True, "log_level": "info"}
    return dict(UVICORN_OPTIONS)


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.", min=1, max=65535)] = 8700,
    db: Annotated[
        Path | None, typer.Option("--db", help="SQLite catalog (default: the user data dir).")
    ] = None,
    postgres: Annotated[
        str | None, typer.Option("--postgres", help="PostgreSQL DSN (postgresql://...).")
    ] = None,
    audit: Annotated[
        str | None,
        typer.Option(
            "--audit",
            help="Audit log: a file or a postgresql:// DSN (default: beside --db;"
            " with --postgres, in that database, one chain for every replica).",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Bind every tool to an executor that echoes the call."),
    ] = False,
    workers: Annotated[int, typer.Option(help="uvicorn worker processes.", min=1, max=64)] = 1,
    jwt_key: Annotated[
        str | None,
        typer.Option(
            "--jwt-key",
            help="HS256 key callers' tokens are signed with. Visible to other users in the"
            " process list: prefer --jwt-key-file or $TOOLSCOUT_TOKEN_KEY.",
        ),
    ] = None,
    jwt_key_file: Annotated[
        Path | None,
        typer.Option("--jwt-key-file", help="File holding the tokens' HS256 key."),
    ] = None,
    jwt_issuer: Annotated[
        str | None, typer.Option("--jwt-issuer", help="Required `iss` claim of tokens.")
    ] = None,
    jwt_audience: Annotated[
        str | None, typer.Option("--jwt-audience", help="Required `aud` claim of tokens.")
    ] = None,
    audit_key_file: Annotated[
        Path | None,
        typer.Option(
            "--audit-key-file",
            help="File holding the audit chain's HMAC key (default: $TOOLSCOUT_AUDIT_KEY;"
            " never the token key).",
        ),
    ] = None,
    access_log: Annotated[
        bool, typer.Option("--access-log", help="Log every request (uvicorn's access log).")
    ] = False,
) -> None:
    """Serve the HTTP API (/v1/discover, /v1/execute, ..., /metrics) under uvicorn."""
    try:
        import uvicorn

        import toolscout.http.app  # noqa: F401  (fails early when the extra is missing)
    except ImportError as exc:
        raise MissingExtraError(exc.name or "fastapi", "server") from None
    if db is not None and postgres is not None:
        raise ConfigError("give either --db or --postgres, not both")
    token_key = token_key_from(jwt_key, jwt_key_file)
    audit_key = audit_key_from(audit_key_file)
    if postgres is not None:
        if not is_dsn(postgres):
            raise ConfigError(f"--postgres must be a postgresql:// DSN, got {postgres[:40]!r}")
        target = postgres
    else:
        from toolscout.settings import default_db_path

        path = db if db is not None else default_db_path()
        if not path.exists():
            raise ConfigError(f"no catalog at {path}; run `toolscout index CATALOG --db {path}`")
        target = str(path)
    os.environ[ENV_DB] = target
    os.environ[ENV_JWT_KEY] = token_key
    _set_env(ENV_AUDIT_KEY, audit_key)
    _set_env(ENV_JWT_ISSUER, jwt_issuer)
    _set_env(ENV_JWT_AUDIENCE, jwt_audience)
    if audit is not None:
        os.environ[ENV_AUDIT] = str(audit)
    os.environ[ENV_DRY_RUN] = "1" if dry_run else "0"
    os.environ[ENV_ACCESS_LOG] = "1" if access_log else "0"
    os.environ[ENV_URL] = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    # each worker's encoder on its share of the cores, unless the user chose
    from toolscout.embed import THREADS_ENV

    os.environ.setdefault(THREADS_ENV, str(encoder_threads(workers)))
    if audit_key is None:
        _warn(
            "the audit chain is unkeyed (anyone who can write its file can rewrite it"
            " undetected): give --audit-key-file or $TOOLSCOUT_AUDIT_KEY"
        )
    # open once in this process, so a bad store or key fails here with one line
    build_service(
        target,
        jwt_key=token_key,
        audit_key=audit_key,
        audit=str(audit) if audit else None,
        jwt_issuer=jwt_issuer,
        jwt_audience=jwt_audience,
    ).close()
    if workers > 1 and hasattr(socket, "SO_REUSEPORT"):
        try:  # a taken port or a bad address: one line here, not a traceback per worker
            _listen(host, port).close()
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        _announce_start(workers)
        run_workers(host, port, workers)
        return
    _announce_start(workers)
    uvicorn.run(APP, factory=True, host=host, port=port, workers=workers, **uvicorn_options())


def encoder_threads(workers: int, cores: int | None = None) -> int:
    """ONNX Runtime threads of each worker's encoder: the cores this process may use
    shared among the workers (at least one). Its default, a thread per core in every
    worker, puts ``workers`` times as many busy threads as cores under load."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        cores = cores or os.cpu_count() or 1
    return max(1, cores // max(1, workers))


def _announce_start(workers: int) -> None:
    many = f"{workers} workers" if workers > 1 else "1 worker"
    typer.echo(
        f"toolscout serve: starting {many} on {os.environ[ENV_URL]} (each loads the model;"
        " /readyz answers 200 once warm)",
        err=True,
    )


def _warn(message: str) -> None:
    typer.echo(f"warning: {message}", err=True)


def _set_env(name: str, value: str | None) -> None:
    if value:
        os.environ[name] = value
    else:
        os.environ.pop(name, None)


def _read_secret(path: Path, option: str) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{option}: cannot read {path}: {reason}") from None
    secret = text.strip("\r\n")
    if not secret:
        raise ConfigError(f"{option}: {path} is empty")
    return secret


def token_key_from(jwt_key: str | None, jwt_key_file: Path | None) -> str:
    """The tokens' key: ``--jwt-key-file``, ``$TOOLSCOUT_TOKEN_KEY`` (or the older
    ``$TOOLSCOUT_JWT_KEY``), or ``--jwt-key`` (with a warning: argv is public)."""
    if jwt_key is not None and jwt_key_file is not None:
        raise ConfigError("give either --jwt-key or --jwt-key-file, not both")
    if jwt_key_file is not None:
        return _read_secret(jwt_key_file, "--jwt-key-file")
    if jwt_key:
        _warn(
            "--jwt-key puts the secret on the command line, where every user of this"
            f" machine can read it (/proc/{os.getpid()}/cmdline); use --jwt-key-file or"
            f" ${ENV_TOKEN_KEY}"
        )
        return jwt_key
    key = os.environ.get(ENV_TOKEN_KEY) or os.environ.get(ENV_JWT_KEY)
    if not key:
        raise ConfigError(f"a token key is required: --jwt-key-file or ${ENV_TOKEN_KEY}")
    return key


def audit_key_from(audit_key_file: Path | None) -> str | None:
    """The audit chain's key: ``--audit-key-file`` or ``$TOOLSCOUT_AUDIT_KEY``; ``None``
    (an unkeyed chain) without either — never the token key."""
    if audit_key_file is not None:
        return _read_secret(audit_key_file, "--audit-key-file")
    return os.environ.get(ENV_AUDIT_KEY) or None


#: the application factory every worker imports, and the options every worker runs with
APP = "toolscout.cli.serve:app_from_environment"
UVICORN_OPTIONS: dict[str, Any] = {
    "log_level": "warning",
    "access_log": False,
    "server_header": False,
}


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


def _worker(host: str, port: int) -> None:
    """One worker process: its own listening socket on the shared port, its own app."""
    import uvicorn

    config = uvicorn.Config(APP, factory=True, **uvicorn_options())
    uvicorn.Server(config).run(sockets=[_listen(host, port)])


def run_workers(host: str, port: int, workers: int) -> None:
    """``workers`` processes, each listening on ``host:port`` with ``SO_REUSEPORT``.

    uvicorn's own ``--workers`` shares one listening socket, and the worker that
    happens to be awake takes the connections: under a load generator's 16
    keep-alive connections one of two workers served nearly all of them (98% vs 6%
    CPU). With a socket per worker the kernel spreads new connections over the
    workers. A worker that exits stops the others; SIGINT/SIGTERM stop them all."""
    import multiprocessing
    import shutil
    import signal
    import tempfile

    from toolscout.http.metrics import MULTIPROC_ENV

    # the workers' metrics in one directory, summed by whichever worker is scraped
    # (spawned workers import prometheus_client afresh, with this in their environment)
    metrics_dir = os.environ.get(MULTIPROC_ENV) or tempfile.mkdtemp(prefix="toolscout-metrics-")
    own_dir = MULTIPROC_ENV not in os.environ
    os.environ[MULTIPROC_ENV] = metrics_dir
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(host, port), daemon=False) for _ in range(workers)]
    for proc in procs:
        proc.start()
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for proc in procs:
            if proc.is_alive():
                proc.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    failed = 0
    try:
        while any(proc.is_alive() for proc in procs):
            for proc in procs:
                proc.join(timeout=0.5)
                if not proc.is_alive() and proc.exitcode not in (0, None) and not stopping:
                    failed = proc.exitcode or 1
                    stop(signal.SIGTERM, None)
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
        if own_dir:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    if failed:
        raise SystemExit(failed)
