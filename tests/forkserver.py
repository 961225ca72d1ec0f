"""Processes of the suite forked from one process that has imported them: the conformance
harness's stdio gateways (``mcp_conformance/run.sh``) and every pytest worker's upstreams,
gateways and CLI commands (``fork_kit.py``, beside it).

Over stdio the harness's bridge (supergateway ``--stateful``) starts a ``toolscout mcp
serve`` process for every session, so for every scenario: 33 a listing mode, each
spending about a second of CPU importing the MCP SDK and the library before it serves
(docs/history/test-suite-time.md, h/conf). ``run.sh`` starts this module once as a server::

    python forkserver.py serve SOCKET

which imports the gateway's modules and then waits; and the bridge runs, for every
session, the client::

    python -I -S forkserver.py connect SOCKET mcp serve --config FILE --mode MODE

which hands its stdin, stdout and stderr, its arguments, environment and working
directory to the server. The server forks; the child puts those three descriptors on its
own 0, 1 and 2, takes that environment and directory, and runs ``python -m toolscout``
with those arguments (``runpy``, as ``-m`` does), ending as that command ends. So every
session still has a gateway process of its own, started fresh from the same command line
on the same pipes, with no state of another session; only the imports are done once. The
client stays as the bridge's child: it passes SIGTERM, SIGINT and SIGHUP on to its
gateway and exits with the gateway's status; if the client dies (the bridge's SIGKILL),
the server kills its gateway.

A gateway started this way skips one thing of a cold start: the MCP SDK is imported
before ``initialize`` arrives, so the window in which the early reader
(``toolscout.mcp.early``) answers alone is short. The harness still makes cold starts
(the stored catalog's first start, the HTTP gateways), and ``tests/test_mcp_early.py``
tests that window. Only the standard library is used here outside the server's imports.

The suite's other tests use it for the Python MCP servers their gateways start as
upstreams (``tests/fork_kit.py``): ``serve SOCKET --while-stdin-open MODULE...`` imports
those modules too and ends when its stdin (a pipe from the pytest worker) closes, and
``connect SOCKET --script PATH ARGS...`` runs ``python PATH ARGS`` (``runpy.run_path``)
instead of ``python -m toolscout ARGS``.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys
from collections.abc import Sequence
from typing import Any

#: what ``toolscout mcp serve`` imports before it serves, and once serving (its catalog's
#: store and log, the discovery pipeline, the encoder's and stemmer's modules, the upstream
#: clients' transport: ~0.1 s of CPU a gateway). Anything missing is imported by the child
#: itself, as a cold start would. Not ONNX Runtime: importing it starts a thread, which a
#: forked child would not have
PRELOAD = (
    "toolscout.cli",
    "toolscout.cli.mcp",
    "toolscout.mcp.early",
    "toolscout.mcp.server",
    "toolscout.mcp.config",
    "toolscout.service",
    "mcp",
    "mcp.server.lowlevel",
    "toolscout.discovery.pipeline",
    "toolscout.stores.sqlite",
    "toolscout.telemetry.log",
    "toolscout.embed.minilm",
    "toolscout.embed.vectorcache",
    "toolscout.mcp.fastcall",
    "toolscout.mcp.pipes",
    "anyio._backends._asyncio",
    "tokenizers",
    "snowballstemmer",
    "platformdirs",
    "typer._adapters",
)
_MAX_MSG = 1 << 20
#: where to write the CPU of each forked process when it is reaped, if the client's
#: environment names a file (``tests/conftest.py`` does when the run counts CPU per test)
LEDGER_ENV = "TOOLSCOUT_TEST_LEDGER"


def serve(path: str, more: list[str] = [], watch_stdin: bool = False) -> dict[str, Any]:  # noqa: B006
    """Import the gateway (and the modules ``more``), listen on the Unix socket ``path``
    and fork a gateway for every client. With ``watch_stdin`` the server ends (killing
    the processes it forked that still run) when its stdin reaches its end. Returns only
    in a forked child: the session it is to run."""
    import gc
    import threading

    preload((*PRELOAD, *more))
    if threading.active_count() != 1:
        raise SystemExit(f"forkserver: the imports started threads: {threading.enumerate()}")
    # what the imports made is shared with every child: out of the collector's reach, a
    # child's collections neither walk it nor copy its pages (the gc module's advice for fork)
    gc.collect()
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "child")
    if watch_stdin:
        sel.register(0, selectors.EVENT_READ, "stdin")
    conns: dict[int, socket.socket] = {}  # a live gateway's pid -> its client's connection
    ledgers: dict[int, tuple[str, str, list[str]]] = {}  # pid -> ledger, test, arguments
    print(f"forkserver: ready on {path} (pid {os.getpid()})", file=sys.stderr, flush=True)
    while True:
        for key, _ in sel.select():
            if key.data == "accept":
                conn, _ = listener.accept()
                msg, fds, _, _ = socket.recv_fds(conn, _MAX_MSG, 3)
                if len(fds) != 3:
                    for fd in fds:
                        os.close(fd)
                    conn.close()
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:  # the session's gateway
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    sel.close()
                    for fd in (wake_r, wake_w):
                        os.close(fd)
                    listener.close()
                    for other in conns.values():
                        other.close()
                    conn.close()
                    job: dict[str, Any] = json.loads(msg)
                    job["fds"] = fds
                    return job
                for fd in fds:
                    os.close(fd)
                _note(ledgers, pid, msg)
                with contextlib.suppress(OSError):  # a client gone already: its end shows next
                    conn.send(json.dumps({"pid": pid}).encode())
                conns[pid] = conn
                sel.register(conn, selectors.EVENT_READ, pid)
            elif key.data == "stdin":
                if not os.read(0, 512):  # whoever started this server is gone
                    for pid in conns:
                        _kill(pid, signal.SIGKILL)
                    raise SystemExit(0)
            elif key.data == "child":
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 512):
                        pass
                _reap(conns, sel, ledgers)
            else:  # the client's connection: it sends nothing, so this is its end
                pid = key.data
                with contextlib.suppress(KeyError, ValueError):  # reaped in this same round
                    sel.unregister(key.fileobj)
                if pid in conns:  # the client died before its gateway: as a group kill
                    _kill(pid, signal.SIGKILL)


def preload(names: Sequence[str]) -> None:
    """Import each module of ``names``; ``MODULE:FUNCTION`` imports the module and calls the
    function with no argument (something it builds once per process and keeps, which a
    forked child then finds built: ``tokencount:encoding``)."""
    import importlib

    for name in names:
        module, _, function = name.partition(":")
        imported = importlib.import_module(module)
        if function:
            getattr(imported, function)()


def _kill(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _note(ledgers: dict[int, tuple[str, str, list[str]]], pid: int, msg: bytes) -> None:
    """Keep where the forked process ``pid`` is to be counted, if its client asked."""
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        job = json.loads(msg)
        env = job.get("env") or {}
        if env.get(LEDGER_ENV):
            test = str(env.get("PYTEST_CURRENT_TEST", ""))
            ledgers[pid] = (env[LEDGER_ENV], test, [str(a) for a in job.get("argv", [])[:3]])


def _count(ledgers: dict[int, tuple[str, str, list[str]]], pid: int, usage: Any) -> None:
    """Append the reaped process's CPU (its own and its reaped children's) to its ledger."""
    noted = ledgers.pop(pid, None)
    if noted is None:
        return
    path, test, argv = noted
    cpu = usage.ru_utime + usage.ru_stime
    line = json.dumps({"test": test, "cpu": round(cpu, 4), "argv": argv}) + "\n"
    with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as ledger:
        ledger.write(line)  # one short write of an O_APPEND file: lines do not interleave


def _reap(
    conns: dict[int, socket.socket],
    sel: selectors.BaseSelector,
    ledgers: dict[int, tuple[str, str, list[str]]],
) -> None:
    """Tell each ended gateway's client how it ended (and count its CPU where asked)."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _count(ledgers, pid, usage)
        conn = conns.pop(pid, None)
        if conn is None:
            continue
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(conn)
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode())
        conn.close()


def become(job: dict[str, Any]) -> None:
    """In a forked child: take the client's descriptors, environment and directory, and
    run ``python -m toolscout ARGS``, or ``python PATH ARGS`` for ``--script PATH ARGS``
    (returns as that run returns or raises)."""
    import runpy

    for target, fd in enumerate(job["fds"]):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(job["env"])
    os.chdir(job["cwd"])
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # new stdio objects on the new descriptors, encoded as this interpreter's own were
    std = [(sys.__stdin__, 0, "r"), (sys.__stdout__, 1, "w"), (sys.__stderr__, 2, "w")]
    new = [
        open(fd, mode, encoding=old.encoding, errors=old.errors, closefd=False)  # noqa: SIM115
        if old is not None
        else open(fd, mode, closefd=False)  # noqa: SIM115
        for old, fd, mode in std
    ]
    new[2].reconfigure(line_buffering=True)
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__ = new
    argv = job["argv"]
    if argv[:1] == ["--script"] and len(argv) >= 2:
        script = os.path.abspath(argv[1])
        sys.argv = [script, *argv[2:]]
        sys.path[0] = os.path.dirname(script)  # as `python PATH` puts it first
        runpy.run_path(script, run_name="__main__")
        return
    sys.argv = ["toolscout", *argv]
    # as `python -m` puts the working directory first (not this server's own directory,
    # the suite's test modules)
    sys.path[0] = os.getcwd()
    runpy.run_module("toolscout", run_name="__main__", alter_sys=True)


def connect(path: str, argv: list[str]) -> int:
    """The bridge's child: hand this process's stdio to a forked gateway, pass signals on,
    and return the gateway's exit status."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(path)
    job = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
    socket.send_fds(sock, [json.dumps(job).encode()], [0, 1, 2])
    # the gateway holds the pipes now: this process keeps none of their ends open
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    gateway: list[int] = []
    pending: list[int] = []

    def forward(signum: int, frame: object) -> None:
        if gateway:
            _kill(gateway[0], signum)
        else:
            pending.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    status = 1
    while True:
        msg = sock.recv(_MAX_MSG)
        if not msg:
            return status
        answer = json.loads(msg)
        if "pid" in answer:
            gateway.append(answer["pid"])
            for signum in pending:
                _kill(gateway[0], signum)
        else:
            status = answer["status"]
            return status if status >= 0 else 128 - status


def main(args: list[str]) -> None:
    if len(args) >= 2 and args[0] == "serve":
        watch = "--while-stdin-open" in args[2:]
        job = serve(args[1], [a for a in args[2:] if a != "--while-stdin-open"], watch)
        become(job)
    elif len(args) >= 3 and args[0] == "connect":
        raise SystemExit(connect(args[1], args[2:]))
    else:
        raise SystemExit(
            "usage: forkserver.py serve SOCKET [--while-stdin-open] [MODULE[:FUNCTION]...]"
            " | connect SOCKET [--script PATH] ARGS..."
        )


if __name__ == "__main__":
    main(sys.argv[1:])
