"""Python MCP servers a test's gateway starts as upstreams, and gateways, forked from one
process per pytest worker that has imported them (``forkserver.py``, beside this module).

A gateway starts each stdio upstream of its configuration as a process (twice for most:
the SDK's session and its own client), and a Python upstream written with the MCP SDK
spends about a second of CPU importing it before it answers (docs/history/test-suite-time.md,
h/suite6). The tests that are not about an upstream's process (its start, its end,
what outlives what) name the upstream with :func:`upstream`: the configured command is
then ``python -I -S forkserver.py connect SOCKET --script PATH ARGS``, a small client that
hands its stdin, stdout and stderr, its environment and directory to the worker's fork
server, which forks a child that runs ``python PATH ARGS`` on those pipes. So every start
is still a process of its own on the gateway's real pipes, with no state of another; the
client passes SIGTERM, SIGINT and SIGHUP on and exits with the child's status, and if the
client is killed, the fork server kills the child. :func:`toolscout` does the same for a
``toolscout mcp serve`` of a test about what the gateway does, not about its start.

In a parallel run one fork server serves every worker: the controlling process starts it
as the workers start (:func:`start_for_run`, from ``tests/conftest.py``; its imports, ~1.6 s
of CPU, then run once a run, not once a worker) and the workers find its socket in
``$TOOLSCOUT_TEST_FORKSERVER``. Each job carries its client's environment and directory,
so a child is the same whichever worker asked for it. Otherwise (one process, or a shared
server that is gone) the fork server starts on first use in the process and ends when
that process does (its stdin is a pipe the process holds).
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FORKSERVER = Path(__file__).resolve().parent / "forkserver.py"

#: what the forked upstreams import, besides the gateway's modules (forkserver.PRELOAD),
#: what ``toolscout serve`` imports before its application (the web framework and the
#: server; not ``toolscout.http``, whose ``prometheus_client`` reads its environment at
#: import: a forked ``serve`` imports that itself, as a cold one does), what the CLI's
#: commands import (a catalog's reading and checking, the terminal's tables), and the
#: token counter's o200k encoding, built once here (``tokencount.encoding``: ~0.3 s of
#: CPU in every ``index`` and in every process that counts a shortlist's tokens; the same
#: ranks from the same shipped file either way, checked against its digest as it is built)
PRELOAD = (
    "mcp.server.mcpserver",
    "mcp.server.mcpserver.exceptions",
    "mcp.types",
    "mcp_server_time",  # the published time server, an upstream of several gateways' tests
    "toolscout.cli.serve",
    "uvicorn",
    "fastapi",
    "toolscout.loader",
    "toolscout.imports",
    "toolscout.discovery.cardsize",
    "jsonschema",
    "rich.console",
    "rich.logging",
    "rich.progress",
    "rich.table",
    "toolscout.discovery.tokencount:encoding",
)

_SERVER: dict[str, Any] = {}
#: the socket of the run's fork server (:func:`start_for_run`), which the workers inherit
RUN_ENV = "TOOLSCOUT_TEST_FORKSERVER"


def _start() -> None:
    """Start a fork server of this process (it ends when this process closes its stdin)."""
    where = Path(tempfile.mkdtemp(prefix="ts-fork-"))
    log = (where / "log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, str(FORKSERVER), "serve", str(where / "s"), "--while-stdin-open",
         *PRELOAD],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )  # fmt: skip
    log.close()
    _SERVER.update(proc=proc, sock=where / "s", where=where)


def _listening(sock: Path) -> bool:
    if not sock.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as probe:
        return probe.connect_ex(str(sock)) == 0


def start_for_run() -> None:
    """In the controlling process of a parallel run, as its workers start: start the one
    fork server they all use and name its socket in the environment they inherit. It
    imports while they collect; a worker waits for it at its first fork."""
    if RUN_ENV in os.environ or _SERVER.get("proc") is not None:
        return
    _start()
    os.environ[RUN_ENV] = str(_SERVER["sock"])


def _shared() -> str | None:
    """The run's fork server's socket once it listens; ``None`` without one, or if it
    ended (this process then starts its own, as without one)."""
    name = os.environ.get(RUN_ENV)
    if not name:
        return None
    sock = Path(name)
    deadline = time.monotonic() + 120
    while not sock.exists():  # still importing
        if time.monotonic() > deadline or not sock.parent.exists():
            return None
        time.sleep(0.05)
    listens = time.monotonic() + 5  # it binds the socket, then listens
    while not _listening(sock):
        if time.monotonic() > listens:
            return None
        time.sleep(0.05)
    return name


def _socket() -> str:
    """The socket of the fork server this process uses: the run's, else its own (started
    if it is not running)."""
    proc = _SERVER.get("proc")
    if proc is None:
        shared = _shared()
        if shared is not None:
            return shared
    if proc is not None and proc.poll() is None and _SERVER.get("ready"):
        return str(_SERVER["sock"])
    if proc is None or proc.poll() is not None:
        _start()
    proc, sock, where = _SERVER["proc"], _SERVER["sock"], _SERVER["where"]
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the fork server ended ({proc.returncode}): "
                               f"{(where / 'log').read_text()}")  # fmt: skip
        if _listening(sock):
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the fork server did not listen within 120 s")
        time.sleep(0.05)
    _SERVER["ready"] = True
    return str(sock)


def _stop() -> None:
    proc = _SERVER.pop("proc", None)
    if proc is not None:
        assert proc.stdin is not None
        proc.stdin.close()  # the server ends at its stdin's end
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(_SERVER.pop("where"), ignore_errors=True)
        _SERVER.pop("ready", None)


atexit.register(_stop)


def command(script: Path, *args: str) -> list[str]:
    """``python SCRIPT ARGS`` as a process forked from the worker's fork server."""
    return [sys.executable, "-I", "-S", str(FORKSERVER), "connect", _socket(), "--script",
            str(script), *args]  # fmt: skip


def toolscout(*args: str) -> list[str]:
    """``python -m toolscout ARGS`` as a process forked from the worker's fork server: a
    gateway for a test of what it does once started, not of how it starts
    (``test_mcp_early.py``, ``test_mcp_startup.py`` and ``test_mcp_front.py`` start theirs
    cold), a CLI command for a test of what it prints and exits with (what a command
    imports is tested in processes of their own: ``test_cli.py``, ``test_imports.py``)."""
    return [sys.executable, "-I", "-S", str(FORKSERVER), "connect", _socket(), *args]


def upstream(script: Path, *args: str, **fields: Any) -> dict[str, Any]:
    """An ``mcpServers`` entry that starts ``python SCRIPT ARGS`` forked (other fields as
    given: ``env``, ``toolscout``...)."""
    cmd = command(script, *args)
    return {"command": cmd[0], "args": cmd[1:], **fields}
