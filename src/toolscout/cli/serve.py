"""``toolscout serve``: the HTTP API under uvicorn.

The command checks its options, puts them in the environment and starts uvicorn
with an application *factory* (:func:`app_from_environment`), so that each of
``--workers N`` processes opens its own ``Toolscout`` on the same SQLite file or
PostgreSQL database.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated, Any

import typer

from toolscout.errors import ConfigError, MissingExtraError
from toolscout.stores.dsn import is_dsn

ENV_DB = "TOOLSCOUT_SERVE_DB"
ENV_JWT_KEY = "TOOLSCOUT_JWT_KEY"
ENV_AUDIT_KEY = "TOOLSCOUT_AUDIT_KEY"
ENV_MAX_BODY = "TOOLSCOUT_MAX_BODY"
ENV_AUDIT = "TOOLSCOUT_SERVE_AUDIT"
ENV_DRY_RUN = "TOOLSCOUT_SERVE_DRY_RUN"


def build_service(
    target: str,
    *,
    jwt_key: str,
    audit_key: str | None = None,
    audit: str | None = None,
    dry_run: bool = False,
) -> Any:
    """A ``Toolscout`` over ``target`` (a SQLite path or a PostgreSQL DSN)."""
    from toolscout import DryRunExecutor, Settings, Toolscout
    from toolscout.discovery.catalog import stored_embedder
    from toolscout.stores import open_store

    settings = Settings(
        db=target, jwt_key=jwt_key, audit_key=audit_key or jwt_key, audit_path=audit or None
    )
    # the model the catalog was indexed with; a server encodes many requests at once: no
    # ONNX Runtime spin-waiting (embed/minilm.py)
    store = open_store(settings.catalog_target())
    try:
        embedder = stored_embedder(store, spin_wait=False)
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
    )
    max_body = int(os.environ.get(ENV_MAX_BODY, str(MAX_BODY)))
    return create_app(service, max_body=max_body, close_on_shutdown=True)


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
            "--jwt-key", envvar=ENV_JWT_KEY, help="HS256 key callers' tokens are signed with."
        ),
    ] = None,
) -> None:
    """Serve the HTTP API (/v1/discover, /v1/execute, ..., /metrics) under uvicorn."""
    try:
        import uvicorn

        import toolscout.http.app  # noqa: F401  (fails early when the extra is missing)
    except ImportError as exc:
        raise MissingExtraError(exc.name or "fastapi", "server") from None
    if db is not None and postgres is not None:
        raise ConfigError("give either --db or --postgres, not both")
    if not jwt_key:
        raise ConfigError(f"a JWT key is required: --jwt-key or ${ENV_JWT_KEY}")
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
    os.environ[ENV_JWT_KEY] = jwt_key
    if audit is not None:
        os.environ[ENV_AUDIT] = str(audit)
    os.environ[ENV_DRY_RUN] = "1" if dry_run else "0"
    # open once in this process, so a bad store or key fails here with one line
    build_service(target, jwt_key=jwt_key, audit=str(audit) if audit else None).close()
    if workers > 1 and hasattr(socket, "SO_REUSEPORT"):
        try:  # a taken port or a bad address: one line here, not a traceback per worker
            _listen(host, port).close()
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        run_workers(host, port, workers)
        return
    uvicorn.run(APP, factory=True, host=host, port=port, workers=workers, **UVICORN_OPTIONS)


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

    config = uvicorn.Config(APP, factory=True, **UVICORN_OPTIONS)
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
