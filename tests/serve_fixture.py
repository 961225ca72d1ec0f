"""Real ``toolscout serve`` processes on 127.0.0.1 for the tests, and tokens for them."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx

import fork_kit
from port_kit import free_port
from toolscout.gateway.auth import issue_token

KEY = "test-http-key-0123456789abcdef0123456789"
#: the audit chain's own key (never the token key)
AUDIT_KEY = "test-audit-key-0123456789abcdef"


#: lifetime of the tokens minted here: longer than any run of the suite on any machine,
#: so a token minted at import (``ALICE = auth(token(...))``) never expires mid-suite
TOKEN_TTL_S = 7 * 86400


def token(subject: str = "alice@acme", tenant: str = "acme", **kw: Any) -> str:
    kw.setdefault("ttl_seconds", TOKEN_TTL_S)
    return issue_token(subject=subject, key=KEY, tenant=tenant, **kw)


def auth(tok: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tok}"}


LOGS: dict[int, Any] = {}


def start_server(
    *args: str, env: dict[str, str] | None = None, cold: bool = False
) -> tuple[subprocess.Popen[bytes], str]:
    """``toolscout serve *args`` on a free port, its secrets in the environment (never
    argv): ``$TOOLSCOUT_TOKEN_KEY`` = :data:`KEY`, ``$TOOLSCOUT_AUDIT_KEY`` = :data:`AUDIT_KEY`
    unless ``env`` says otherwise. Ready when ``/readyz`` answers 200.

    The process is forked from the worker's fork server (``fork_kit``: the same command
    line, environment and pipes, a process of its own, with the HTTP stack imported ahead)
    unless ``cold`` or ``--workers`` is given: a test of how the server starts gets a
    fresh interpreter, and ``--workers`` spawns its workers (each a fresh interpreter that
    reads ``$PROMETHEUS_MULTIPROC_DIR`` when it imports ``prometheus_client``)."""
    cold = cold or "--workers" in args
    for attempt in range(3):
        try:
            return _start_server(args, env, cold)
        except PortTaken:
            # another process (a parallel test worker) bound the free port first
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


class PortTaken(RuntimeError):
    """The port picked for ``serve`` was bound by another process before it."""


def _start_server(
    args: tuple[str, ...], env: dict[str, str] | None, cold: bool
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    serve = ("serve", "--port", str(port), *args)
    cmd = [sys.executable, "-m", "toolscout", *serve] if cold else fork_kit.toolscout(*serve)
    log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by stop())
    secrets = {"TOOLSCOUT_TOKEN_KEY": KEY, "TOOLSCOUT_AUDIT_KEY": AUDIT_KEY}
    proc = subprocess.Popen(
        cmd,
        env={**os.environ, **secrets, **(env or {})},
        stdout=log,  # the access log (uvicorn writes it to stdout) beside everything else
        stderr=subprocess.STDOUT,
    )
    LOGS[proc.pid] = log
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120  # a loaded machine: generous, ends at ready
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            text = log.read().decode()
            stop(proc)
            if "address already in use" in text.lower():
                raise PortTaken(text[-2000:])
            raise RuntimeError(f"serve exited: {text[-2000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.2)
    stop(proc)
    raise RuntimeError("serve did not become ready in 120 s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log = LOGS.pop(proc.pid, None)
    if log is not None:
        log.close()
