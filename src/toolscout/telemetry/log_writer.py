"""The discovery log's writer: records held in memory, written by one thread in batches.

A record is appended to the log's held records (no lock: a deque's append is atomic) and
the writer thread is woken only by the first record after it emptied them; it lets
records gather for :data:`GATHER_S` (cut short by a full batch or ``close``), then
writes all it holds, :data:`WRITE_BATCH` statements a transaction. A steady stream of
requests so wakes the thread, and hands it the interpreter, once a batch, not once a
record, and a request never waits for it. A call or feedback that links to a discovery
another process (an HTTP worker, a replica) may still hold is looked up again for a while
(``owner_wait_s`` in ``log_reads.py``).

Records are taken only under the log's ``_lock`` and written before it is released, so
whoever takes the lock next and finds nothing held knows that every record appended
before it is in the database: :meth:`HeldWrites.flush`, a reader, ``close``, the
interpreter's exit and the MCP gateway's SIGTERM (:func:`flush_open_logs`) each write
what is held on their own thread. What a process killed outright held is lost (at most
:data:`GATHER_S` of records, or a batch), as a row is in any log written after the fact.

:class:`HeldWrites` is mixed into :class:`~toolscout.telemetry.log.DiscoveryLog`, which
gives it the connection (``_lock``, ``_transaction``, ``_execute``, ``_connected``).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import threading
import weakref
from collections.abc import Sequence
from typing import Any

__all__ = ["GATHER_S", "MAX_PENDING", "WRITE_BATCH", "HeldWrites", "flush_open_logs"]

#: statements written in one transaction at most; this many held wake the writer at once
WRITE_BATCH = 500
#: seconds the writer lets records gather after the first of a batch (a reader, ``flush``,
#: ``close`` and the process's exit write what is held at once)
GATHER_S = 0.25
#: records held at most (more are dropped rather than block the request path)
MAX_PENDING = 100_000

#: every log with a writer thread (written out at exit: :func:`flush_open_logs`)
_OPEN: weakref.WeakSet[HeldWrites] = weakref.WeakSet()
_EXIT_HOOK: list[bool] = []
_START_LOCK = threading.Lock()


def flush_open_logs(timeout_s: float = 5.0) -> None:
    """Write what every open log holds, now, on this thread: at the interpreter's exit
    (registered with the first writer thread) and before a process ends without unwinding
    (the MCP gateway's SIGTERM). Never waits for a log's lock longer than ``timeout_s``
    (a thread stopped while holding it must not hang the exit)."""
    for log in list(_OPEN):
        with contextlib.suppress(Exception):  # one log's fault must not keep the others
            log._write_held(timeout_s)


class HeldWrites:
    """The writing side of a log: held records, the writer thread, the batches."""

    _lock: threading.Lock

    def _transaction(self) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        raise NotImplementedError

    def _connected(self) -> bool:
        raise NotImplementedError

    def _init_writer(self) -> None:
        #: records not yet written, oldest first (appended by any thread, taken under _lock)
        self._held: collections.deque[tuple[str, tuple[Any, ...]]] = collections.deque()
        #: set by the first record after the writer emptied ``_held`` (wakes it)
        self._wake = threading.Event()
        #: set when a batch is full or the log closes (the writer gathers no longer)
        self._full = threading.Event()
        self._closing = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def _hold(self, sql: str, params: tuple[Any, ...]) -> bool:
        """Hold one statement for the writer; False when it was dropped (closed, or full)."""
        if self._thread is None:
            if self._closed:
                return False  # a record after close: nowhere to write it
            self._start()
        held = self._held
        if len(held) >= MAX_PENDING:  # the database is stuck: drop rather than block
            return False
        held.append((sql, params))
        n = len(held)
        if n == 1:
            self._wake.set()
        if n >= WRITE_BATCH:
            self._full.set()
        return True

    def _start(self) -> None:
        with _START_LOCK:
            if self._thread is not None:
                return
            if not _EXIT_HOOK:  # what is held when the interpreter exits is written then
                _EXIT_HOOK.append(True)
                atexit.register(flush_open_logs)
            _OPEN.add(self)
            thread = threading.Thread(target=self._writer, name="toolscout-log", daemon=True)
            thread.start()
            self._thread = thread

    def _writer(self) -> None:
        while True:
            if not self._held and not self._closing:
                self._wake.wait()  # asleep until a first record
            self._wake.clear()
            if not self._closing:
                self._full.wait(GATHER_S)  # records gather (a full batch: at once)
            self._full.clear()
            with self._lock:
                if self._closed:
                    return
                self._write_all()
            if self._closing:
                return

    def _write_all(self) -> None:
        """Write every held record, in batches of WRITE_BATCH (under ``_lock``)."""
        held = self._held
        while held:
            batch = [held.popleft() for _ in range(min(len(held), WRITE_BATCH))]
            self._write(batch)

    def _write(self, items: Sequence[tuple[str, tuple[Any, ...]]]) -> None:
        """One transaction for the batch; if it fails, each statement on its own.

        Telemetry must never break the request path (nor stop the writer thread): a
        statement that fails is dropped."""
        try:
            with self._transaction():
                for sql, params in items:
                    self._execute(sql, params)
            return
        except Exception:  # retried one by one below
            pass
        for sql, params in items:
            try:
                self._execute(sql, params)
            except Exception:
                if not self._connected():  # the database is out of reach: drop the batch
                    return

    def _write_held(self, timeout_s: float) -> None:
        """What is held, written on this thread (:func:`flush_open_logs`); gives up after
        ``timeout_s`` waiting for ``_lock``."""
        if not self._lock.acquire(timeout=timeout_s):
            return
        try:
            if not self._closed:
                self._write_all()
        finally:
            self._lock.release()

    def flush(self) -> None:
        """Write what is held, now, on this thread (after a batch being written)."""
        with self._lock:
            if not self._closed:
                self._write_all()

    def _stop_writer(self) -> None:
        """The writer thread writes what it holds and ends (``close``, before the rest)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._closing = True
            self._wake.set()
            self._full.set()
            thread.join(timeout=5)
        _OPEN.discard(self)
