"""Readers' holds on the derived rows a SQLite catalog keeps: who may still read them.

A kept map's rows (``derived_rows`` under a token, :mod:`toolscout.stores.sqlite_derived`)
that another toolscout version kept for the current generation are read by that
version's running processes, and briefly by a new version serving them while it derives
its own. They are removed only when no process reads them: a reader holds a **shared**
lock on one byte of the file ``<catalog>-kept.lock`` (the byte stands for the token) for
as long as it may read the rows (:func:`hold`), and the rows' header is removed only
under an **exclusive** lock on that byte, taken without waiting (:func:`unread`): while a
reader holds it, the remover leaves the rows; while the remover holds it, no reader
starts (it finds the header gone once the lock is free, and reads nothing under it).

POSIX record locks (``fcntl.lockf``), as SQLite itself uses: the OS drops them when a
process ends however it ends, so no dead reader keeps rows for good. They belong to the
process, not the descriptor, so this process's own holds are counted here (a lock taken
twice is one lock, and released once is gone), and the lock file's descriptor is kept
open for the process's life (closing any descriptor of a file drops the process's locks
on it). Where there are no such locks (not POSIX, an in-memory catalog, a directory the
lock file cannot be made in), a hold is a release that does nothing and nothing is
removed for the generation it was kept for (as before these holds).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: no locks (see above)
    fcntl = None  # type: ignore[assignment]

__all__ = ["hold", "lock_path", "unread"]

_LOCK = threading.Lock()
_FILES: dict[str, int | None] = {}  # lock file -> its descriptor (None: cannot be made)
_HELD: Counter[tuple[str, int]] = Counter()  # (lock file, byte) -> this process's holds
_REMOVING: set[tuple[str, int]] = set()  # bytes this process removes rows under
#: holds whose release came while the lock was taken (a release may run from a finalizer,
#: i.e. from the collector, at any allocation — also inside this module's own critical
#: sections): given up under the lock by the next hold or removal
_PENDING: list[Callable[[], None]] = []


def _forked() -> None:
    """In a forked child: it holds none of its parent's record locks (they are not
    inherited), so none is counted; what it reads from now on it holds itself (a map it
    inherited is read without a hold: the readers' fallback covers it)."""
    global _LOCK
    _LOCK = threading.Lock()
    _HELD.clear()
    _REMOVING.clear()
    _PENDING.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def lock_path(catalog: str) -> str | None:
    """The readers' lock file of the catalog file ``catalog`` (None: in memory)."""
    if catalog == ":memory:" or catalog.startswith("file:"):
        return None
    return str(Path(catalog).resolve()) + "-kept.lock"


def _spot(catalog: str, token: str) -> tuple[int, tuple[str, int]] | None:
    """The lock file's descriptor and (file, byte) standing for ``token`` (two tokens may
    share a byte: each then keeps the other's rows while it is read, never the reverse)."""
    name = lock_path(catalog) if fcntl is not None else None
    if name is None:
        return None
    with _LOCK:
        if name not in _FILES:
            fd = None
            with suppress(OSError):
                fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o644)
            _FILES[name] = fd
        fd = _FILES[name]
    if fd is None:
        return None
    return fd, (name, int.from_bytes(hashlib.sha256(token.encode()).digest()[:4], "big"))


def hold(catalog: str, token: str) -> Callable[[], None] | None:
    """Hold the rows under ``token`` in ``catalog`` against removal until the returned
    release is called (once is enough; again does nothing). None when they are being
    removed now: the caller must not read them."""
    found = _spot(catalog, token)
    if found is None:
        return _nothing
    fd, spot = found
    with _LOCK:
        _settle()
        if spot in _REMOVING:
            return None
        if _HELD[spot] == 0:
            try:
                fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, spot[1])
            except OSError:  # another process is removing rows under it
                return None
        _HELD[spot] += 1
    done: list[bool] = []
    owner = os.getpid()

    def give_up() -> None:  # under the lock
        if done or os.getpid() != owner:  # released, or a forked child's copy
            return
        done.append(True)
        _HELD[spot] -= 1
        if _HELD[spot] == 0:
            del _HELD[spot]
            with suppress(OSError):
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, spot[1])

    def release() -> None:
        _PENDING.append(give_up)  # never waits for the lock (see _PENDING)
        if _LOCK.acquire(blocking=False):
            try:
                _settle()
            finally:
                _LOCK.release()

    return release


def _settle() -> None:
    """Under the lock: give up the holds released meanwhile."""
    while _PENDING:
        _PENDING.pop()()


def unread(catalog: str, token: str) -> Callable[[], None] | None:
    """An exclusive lock on ``token``'s byte when no process holds it (this one included),
    kept until the returned release; None when a reader holds it, or where there are no
    locks (then nothing kept for the current generation is removed)."""
    found = _spot(catalog, token)
    if found is None:
        return None
    fd, spot = found
    with _LOCK:
        _settle()
        if _HELD[spot] or spot in _REMOVING:
            return None
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, spot[1])
        except OSError:  # a reader in another process holds it
            return None
        _REMOVING.add(spot)
    owner = os.getpid()

    def release() -> None:
        with _LOCK:
            if spot in _REMOVING and os.getpid() == owner:
                _REMOVING.discard(spot)
                with suppress(OSError):
                    fcntl.lockf(fd, fcntl.LOCK_UN, 1, spot[1])

    return release


def _nothing() -> None:
    return None
