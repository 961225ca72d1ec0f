"""The gateway's own answers taken off an upstream's stdout pipe as the bytes arrive.

On the way back from an upstream, asyncio's subprocess transport hands each chunk of its
stdout to the process's protocol through ``call_soon`` (a turn of the event loop), whose
``StreamReader`` then wakes the transport's reader task (another turn), which decodes,
splits and routes the lines: two turns of the loop (each an ``epoll`` call and the loop's
own work) before the call waiting for the answer is even scheduled.

:class:`Tap` sits between the pipe's transport and that protocol. A chunk made only of
whole lines whose leading lines answer the gateway's own requests
(:meth:`~toolscout.mcp.lean.LeanStdio.take_answer`) has those lines taken at once; the
rest of the chunk goes on to the protocol unchanged. It takes lines only while the
reader task has consumed every byte passed on before (``fed == consumed``) and those
bytes ended a line: a line the upstream wrote earlier (a log notification, a progress
report) is never overtaken by an answer written after it, and the end of a line whose
start the reader holds is never read as a line of its own. Anything else — a partial
line, a line that does not decode, a notification, an answer to the SDK's own requests —
goes the usual way, where the reader task routes it as before. End of file and a lost
connection are passed on as they come.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

__all__ = ["Tap", "install"]

log = logging.getLogger(__name__)


class Owner(Protocol):
    """What the tap asks of its transport (``LeanStdio``)."""

    #: bytes passed on to the reader task, and bytes it has finished with
    fed: int
    consumed: int

    def take_answer(self, line: str) -> bool: ...


class Tap(asyncio.Protocol):
    """The protocol of an upstream's stdout pipe: own answers taken, the rest passed on."""

    def __init__(self, inner: Any, owner: Owner, encoding: str, errors: str) -> None:
        self._inner = inner
        self._owner = owner
        self._encoding = encoding
        self._errors = errors
        #: lines taken here (a count, for tests and profiles)
        self.taken = 0
        #: the bytes passed on last did not end a line: the reader holds the start of one
        self._mid_line = False

    def connection_made(self, transport: Any) -> None:  # pragma: no cover - made before
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        owner = self._owner
        if not self._mid_line and owner.fed == owner.consumed and data.endswith(b"\n"):
            start = self._take(data)
            if start:
                data = data[start:]
                if not data:
                    return
        owner.fed += len(data)
        self._mid_line = not data.endswith(b"\n")
        self._inner.data_received(data)

    def _take(self, data: bytes) -> int:
        """Take the leading lines of ``data`` that answer own requests; where the rest starts."""
        start = 0
        while start < len(data):
            end = data.index(b"\n", start)
            try:
                line = data[start:end].decode(self._encoding, self._errors)
            except (UnicodeDecodeError, LookupError):
                break
            if not self._owner.take_answer(line):
                break
            self.taken += 1
            start = end + 1
        return start

    def eof_received(self) -> bool | None:
        result: bool | None = self._inner.eof_received()
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:  # pragma: no cover - a read pipe
        self._inner.pause_writing()

    def resume_writing(self) -> None:  # pragma: no cover - a read pipe
        self._inner.resume_writing()


def install(process: Any, owner: Owner, encoding: str, errors: str) -> Tap | None:
    """Put a :class:`Tap` on the stdout pipe of ``process`` (anyio's process over asyncio's
    subprocess transport, as the SDK spawns it); ``None`` when that is not what it is (the
    lines then all go the usual way)."""
    inner_process = getattr(process, "_process", None)
    transport = getattr(inner_process, "_transport", None)
    get_pipe = getattr(transport, "get_pipe_transport", None)
    pipe = get_pipe(1) if callable(get_pipe) else None
    if pipe is None or not callable(getattr(pipe, "set_protocol", None)):
        log.debug("no tap on the upstream's stdout: not an asyncio subprocess pipe")
        return None
    tap = Tap(pipe.get_protocol(), owner, encoding, errors)
    pipe.set_protocol(tap)
    return tap
