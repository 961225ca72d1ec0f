"""The stdio server processes the gateway starts: found beside toolscout, killed with it.

The SDK starts each stdio server in its own session (so a terminal's Ctrl-C does not
reach it); each connection records the session leaders it started in :data:`SPAWNED`,
and :func:`kill_children` kills what is left of them when the gateway stops.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["SPAWNED", "kill_children", "leaders", "resolve_command"]

#: pids of the stdio servers the connections here started (their process groups)
SPAWNED: set[int] = set()


def resolve_command(command: str, env: Mapping[str, str] | None = None) -> str:
    """A bare command not on ``PATH`` is looked up beside this Python interpreter too, so
    servers installed into toolscout's own environment (``mcp-server-time``) start even
    when that environment is not activated (as when a desktop client launches us)."""
    if os.sep in command or shutil.which(command, path=(env or {}).get("PATH")):
        return command
    beside = Path(sys.executable).parent / command
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else command


def kill_children() -> int:
    """Kill the process group of every stdio server this process started and still has.

    The SDK starts each stdio server in its own session (so a terminal's Ctrl-C does not
    reach it) and stops it when its connection closes; a connection abandoned mid-call
    or a gateway stopped by a signal could leave one running. Each connection records
    the session leaders it started (:data:`SPAWNED`). Returns how many were killed.
    With none recorded there is nothing to look for: ``/proc`` is not read (a gateway of
    HTTP upstreams only, which runs this as it stops)."""
    import signal

    if not SPAWNED:
        return 0
    killed = 0
    for pid in sorted(leaders() & SPAWNED):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
            killed += 1
    SPAWNED.clear()
    return killed


def leaders() -> set[int]:
    """This process's children that lead their own session (how the SDK starts servers)."""
    me = os.getpid()
    return {pid for pid, ppid, sid in _children_of(me) if ppid == me and sid == pid}


def _children_of(parent: int) -> list[tuple[int, int, int]]:
    """(pid, ppid, session id) of ``parent``'s children, from ``/proc`` (Linux; else none)."""
    out: list[tuple[int, int, int]] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return out
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 3 and int(fields[1]) == parent:
            out.append((int(entry.name), int(fields[1]), int(fields[3])))
    return out
