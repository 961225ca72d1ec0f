"""A start-up timeline of the MCP gateway, for finding where a client's wait goes.

With ``TOOLSCOUT_TIMELINE`` set, :func:`mark` prints one line on stderr per step of a
start (``toolscout timeline: +1.234 s  <what>``): the command line entered, the library
and the MCP SDK imported, the catalog open, the encoder loaded, the first ``tools/list``
and the first ``search_tools`` answered, and what the search waited for. The seconds count
from the spawn when the variable holds its wall-clock time (``time.time()``, as
``benchmarks/mcp_gateway.py --timeline`` sets it), else from the process's start. Unset,
:func:`mark` does nothing. Only the standard library is imported here (it runs before
anything else is imported).
"""

from __future__ import annotations

import os
import sys
import threading
import time

__all__ = ["ENV", "enabled", "mark"]

ENV = "TOOLSCOUT_TIMELINE"
_origin: float | None = None
_lock = threading.Lock()
_seen: set[str] = set()


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def _start() -> float:
    """The wall-clock time the marks count from."""
    value = os.environ.get(ENV, "")
    try:
        spawned = float(value)
    except ValueError:
        spawned = 0.0
    if spawned > 1e9:  # an epoch time: the spawn, as the parent saw it
        return spawned
    try:  # this process's start (Linux): ticks after boot
        with open("/proc/self/stat") as f:
            ticks = float(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            boot = next(float(line.split()[1]) for line in f if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


def mark(what: str, *, once: bool = False) -> None:
    """One timeline line on stderr (``once``: only the first time ``what`` is marked)."""
    global _origin
    if not os.environ.get(ENV):
        return
    now = time.time()
    with _lock:
        if once:
            if what in _seen:
                return
            _seen.add(what)
        if _origin is None:
            _origin = _start()
        line = f"toolscout timeline: +{now - _origin:7.3f} s  {what}\n"
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
