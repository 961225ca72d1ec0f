"""Ports for the servers the suite starts: each test process takes its own block of ports
below the kernel's ephemeral range.

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` comes from the ephemeral range,
the same range every outgoing connection's local port and every other worker's "free"
port come from. A test that stops an upstream and starts it again on the same port (the
gateway's configuration names it) leaves it free meanwhile, and another worker could be
handed it: the restarted upstream then fails to bind, and the gateway reconnects to
whatever else listens there (``test_mcp_server.py::test_list_changed_faults_and_dynamic_list``
failed that way once under load, round sixteen).

Here a run's workers share a slice below the ephemeral range (chosen from the run's id, so
two suites on one machine rarely meet), each worker a block of its own in it, handed out
in turn and checked bindable. The kernel never picks these ports on its own, and no other
worker of the run hands them out.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import socket
import threading
from pathlib import Path

#: ports per worker: more than any worker starts servers in a run (they are handed out in
#: turn, so a block wraps round only after this many)
BLOCK = 250
#: the lowest port used; the highest is just below the ephemeral range
FLOOR = 10_000
#: workers per run the slice is cut for (tests/conftest.py runs at most 4)
WORKERS = 8


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default; other systems: the IANA range starts higher still


def _worker() -> int:
    name = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...; unset in one process
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0


def block_start(worker: int, run: str, ephemeral_low: int) -> int | None:
    """The first port of a worker's block in a run's slice, or None when there is no room
    below the ephemeral range (then the kernel picks, as before)."""
    slices = (ephemeral_low - FLOOR) // (BLOCK * WORKERS)
    if slices < 1:
        return None
    slot = int.from_bytes(hashlib.blake2b(run.encode(), digest_size=4).digest(), "big") % slices
    return FLOOR + (slot * WORKERS + worker % WORKERS) * BLOCK


_START = block_start(
    _worker(), os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid()), _ephemeral_low()
)
_NEXT = itertools.count()
_LOCK = threading.Lock()


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on, from this process's block (in turn, each
    checked bindable), or one the kernel picks when the block has none free."""
    if _START is not None:
        for _ in range(BLOCK):
            with _LOCK:
                port = _START + next(_NEXT) % BLOCK
            if _bindable(port):
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
