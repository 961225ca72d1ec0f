"""Which Python processes a command (a pytest run) starts, by kind, and the CPU of each kind.

Runs the command with a ``sitecustomize`` module on ``PYTHONPATH`` that makes every Python
process started under it (pytest and its workers, the ``toolscout`` commands, gateways and
servers the tests start, their Python upstreams) append one JSON line at its exit: its
command line, its own CPU (user + system, without its children), whether it had imported
the MCP SDK and whether it had built the token counter (imported tiktoken). A process
ended by SIGTERM writes its line first; one killed by SIGKILL, one that ends with
``os._exit`` or one started with an environment of its own (without this ``PYTHONPATH``)
writes none, and nothing else (node, PostgreSQL, shells) is counted: a cgroup around the
command gives the whole CPU (docs/history/test-suite-time.md, h/suite3 and h/suite4).
Prints the kinds, the most CPU first.

    PYTHONPATH=src .venv/bin/python benchmarks/suite_processes.py -- \
        .venv/bin/python -m pytest -n 2 -q -p no:cacheprovider tests/test_cli.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LOG_ENV = "SUITE_PROCESSES_LOG"

#: written as ``sitecustomize.py`` into a temporary directory put first on PYTHONPATH
HOOK = f'''
import os
if os.environ.get("{LOG_ENV}"):
    import atexit, json, resource, signal, sys

    def _log(how):
        own = resource.getrusage(resource.RUSAGE_SELF)
        line = {{"pid": os.getpid(), "argv": list(getattr(sys, "orig_argv", sys.argv)),
                 "cpu": own.ru_utime + own.ru_stime, "how": how, "mcp": "mcp" in sys.modules,
                 "tiktoken": "tiktoken" in sys.modules}}
        with open(os.environ["{LOG_ENV}"], "a") as f:
            f.write(json.dumps(line) + "\\n")

    atexit.register(_log, "exit")

    def _term(signum, frame):
        _log("SIGTERM")
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _term)
    except (ValueError, OSError):  # not the main thread of the main interpreter
        pass
'''


def kind(argv: Sequence[str]) -> str:
    """A process's kind from its command line (``sys.orig_argv``)."""
    args = list(argv[1:])
    text = " ".join(args)
    if args[:2] == ["-m", "toolscout"] or (args and args[0].endswith("bin/toolscout")):
        rest = args[2:] if args[:2] == ["-m", "toolscout"] else args[1:]
        if rest[:2] == ["mcp", "serve"]:
            return "toolscout mcp serve (gateway)"
        if rest[:1] == ["serve"]:
            return "toolscout serve (HTTP)"
        words = rest[:2] if rest[:1] in (["mcp"], ["token"]) else rest[:1]
        return "toolscout " + " ".join(words)
    if args[:2] == ["-m", "pytest"]:
        return "pytest (controller)"
    if "multiprocessing" in text:
        return "multiprocessing child (serve --workers)"
    if "exec(eval(sys.stdin.readline()))" in text:
        return "pytest worker (xdist)"
    if args[:1] == ["-c"]:
        called = "toolscout.cli" in text and "main(" in text
        return "toolscout (through python -c)" if called else "python -c (a test's helper)"
    if args[:2] == ["-m", "pip"]:
        return "pip"
    return "python " + (Path(args[0]).name if args else "")


def table(rows: list[dict[str, Any]]) -> list[str]:
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by[kind(row["argv"])].append(row)
    total = sum(r["cpu"] for r in rows)
    lines = [f"{len(rows)} Python processes, {total:.1f} s of their own CPU", ""]
    lines.append(
        "processes   CPU (s)   mean   SDK imported   token counter   ended by SIGTERM   kind"
    )
    for name, group in sorted(by.items(), key=lambda kv: -sum(r["cpu"] for r in kv[1])):
        cpu = sum(r["cpu"] for r in group)
        sdk = sum(bool(r["mcp"]) for r in group)
        counter = sum(bool(r.get("tiktoken")) for r in group)
        term = sum(r["how"] != "exit" for r in group)
        lines.append(
            f"{len(group):9d} {cpu:9.1f} {cpu / len(group):6.2f} {sdk:14d} {counter:15d}"
            f" {term:18d}   {name}"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, help="keep the JSON lines here (default: temporary)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    with tempfile.TemporaryDirectory(prefix="suite-processes-") as tmp:
        (Path(tmp) / "sitecustomize.py").write_text(HOOK)
        log = args.log or Path(tmp) / "processes.jsonl"
        log.unlink(missing_ok=True)
        paths = [tmp, *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), LOG_ENV: str(log)}
        code = subprocess.run(command, env=env).returncode
        rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    print("\n".join(table(rows)))
    return code


if __name__ == "__main__":
    sys.exit(main())
