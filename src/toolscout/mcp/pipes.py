"""The caller-facing stdio of the gateway on the event loop, without a thread per line.

The SDK's ``stdio_server`` reads stdin and writes stdout through ``anyio.wrap_file``:
every line read, every write and every flush is a hop to a worker thread and back
(three per forwarded call), each a wake-up of another thread and a wait for the
interpreter lock — on a loaded 2-core machine a few milliseconds per call. When
stdin and stdout are pipes or sockets (as when a client spawns the gateway), this
module serves them with asyncio's own pipe transports instead, and hands the SDK
the same interface it takes (``stdio_server(stdin=..., stdout=...)``): an async
iterator of text lines and an async ``write`` / ``flush``.

Like the SDK with a stream it claims itself, :func:`stdio` moves the wire to private
descriptors and points fd 0 at the null device and fd 1 at stderr while serving, so
stray output of a handler or a child never reaches the client; both are put back on
exit. A descriptor that is not a pipe or a socket (a terminal, a file) is left to
the SDK's own threaded reading and writing (``None`` in its place).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import os
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["LINE_LIMIT", "PipeLines", "PipeOut", "pipe_like", "stdio"]

#: longest line read (a JSON-RPC message; the argument caps are far below it)
LINE_LIMIT = 1 << 30


def pipe_like(fd: int) -> bool:
    """Whether ``fd`` is a pipe or a socket of its own (what asyncio's pipe transports
    serve, which make it non-blocking). Left out: a terminal (the flag would outlive the
    gateway in the shell), and a pipe that stderr shares (``2>&1``: a write to stderr,
    ours or a child's, could then fail with ``EAGAIN``)."""
    try:
        info = os.fstat(fd)
    except OSError:
        return False
    if not (stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode)):
        return False
    with contextlib.suppress(OSError):
        err = os.fstat(2)
        if fd != 2 and (err.st_dev, err.st_ino) == (info.st_dev, info.st_ino):
            return False
    return True


class PipeLines:
    """The lines of a pipe (after ``prefix``: bytes already read from it), as text.

    ``hook``, when set, is offered each line as its bytes arrive, in the pipe's own
    callback — but only while the reader is waiting for the next line and no earlier line
    is still queued for it, so lines are offered in their order and a line is never taken
    ahead of one the reader was handed first. A line the hook takes (``True``) is not
    returned by the iterator; any other line is, once. A line that arrives while the reader
    is busy is offered when the reader asks for it. (The fast path, ``mcp/fastcall.py``,
    takes its calls this way: a turn of the event loop sooner than through the reader.)
    """

    def __init__(self, fd: int, prefix: bytes = b"") -> None:
        self._fd = fd
        self._prefix = prefix
        self._transport: asyncio.BaseTransport | None = None
        self._buffer = bytearray()
        #: lines for the reader, each with whether the hook was offered it already
        self._ready: collections.deque[tuple[str, bool]] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._error: BaseException | None = None
        self.hook: Callable[[str], bool] | None = None

    def __aiter__(self) -> PipeLines:
        return self

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        if self._prefix:
            self._feed(self._prefix)
            self._prefix = b""
        pipe = os.fdopen(self._fd, "rb", buffering=0, closefd=False)
        self._transport, _ = await loop.connect_read_pipe(lambda: _LineProtocol(self), pipe)

    async def __anext__(self) -> str:
        if self._transport is None and not self._ended:
            await self._open()
        while True:
            while self._ready:
                line, offered = self._ready.popleft()
                if offered or not self._offer(line):
                    return line
            if self._error is not None:
                raise self._error
            if self._ended:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def _offer(self, line: str) -> bool:
        hook = self.hook
        return hook is not None and hook(line)

    def _feed(self, data: bytes) -> None:
        """Bytes from the pipe: whole lines to the hook (reader waiting) or the queue."""
        old = len(self._buffer)
        self._buffer += data
        cut = self._buffer.rfind(b"\n", old)
        if cut < 0:
            if len(self._buffer) > LINE_LIMIT:
                self._fail(ValueError(f"a line longer than {LINE_LIMIT} bytes"))
            return
        whole = bytes(self._buffer[: cut + 1])
        del self._buffer[: cut + 1]
        for raw in whole.split(b"\n")[:-1]:
            self._queue((raw + b"\n").decode("utf-8", "replace"))
        self._wake()

    def _queue(self, line: str) -> None:
        if self._waiter is not None and not self._ready and self.hook is not None:
            if self._offer(line):
                return
            self._ready.append((line, True))
        else:
            self._ready.append((line, False))

    def _end(self) -> None:
        if self._buffer:  # the last line without its newline, as ``readline`` gives it
            self._ready.append((bytes(self._buffer).decode("utf-8", "replace"), False))
            self._buffer.clear()
        self._ended = True
        self._wake()

    def _fail(self, exc: BaseException) -> None:
        self._error = exc
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done() and (self._ready or self._ended or self._error):
            waiter.set_result(None)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class _LineProtocol(asyncio.Protocol):
    """The pipe's protocol: its bytes to :class:`PipeLines`, as they arrive."""

    def __init__(self, lines: PipeLines) -> None:
        self._lines = lines

    def data_received(self, data: bytes) -> None:
        self._lines._feed(data)

    def eof_received(self) -> bool:
        self._lines._end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            self._lines._fail(exc)
        else:
            self._lines._end()


class PipeOut:
    """Text written to a pipe: ``write`` queues it, ``flush`` waits until the pipe took it."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._writer: asyncio.StreamWriter | None = None
        self._opening: asyncio.Lock | None = None

    async def _open(self) -> asyncio.StreamWriter:
        """The writer, opened once (two writers, the SDK's and the fast path's, may ask
        at the same time)."""
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._writer is None:
                self._writer = await self._connect()
        return self._writer

    async def _connect(self) -> asyncio.StreamWriter:
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(self._fd, "wb", buffering=0, closefd=False)
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), pipe
        )
        return asyncio.StreamWriter(transport, protocol, None, loop)

    async def write(self, text: str) -> None:
        writer = self._writer
        if writer is None:
            writer = await self._open()
        writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        if self._writer is not None:
            await self._writer.drain()

    def close(self) -> bool:
        """Close the transport; whether everything written has left (else the transport
        goes on writing what is buffered, and the descriptor must stay open for it)."""
        if self._writer is None:
            return True
        drained = self._writer.transport.get_write_buffer_size() == 0
        self._writer.close()
        return drained


def _claim(fd: int, flags: int, diversion: str | int) -> int:
    """Move ``fd``'s wire to a private descriptor (close-on-exec, above 2), point ``fd`` at
    ``diversion`` (a path, or a descriptor to duplicate); the private descriptor."""
    private: int = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    try:
        other = os.open(diversion, flags) if isinstance(diversion, str) else os.dup(diversion)
    except OSError:
        os.close(private)
        raise
    try:
        os.dup2(other, fd)
    except OSError:
        os.close(private)
        raise
    finally:
        os.close(other)
    return private


def _restore(fd: int, private: int, close: bool = True) -> None:
    """Point ``fd`` back at the wire (blocking again, unless it is still being written)
    and close the private descriptor (``close``)."""
    with contextlib.suppress(OSError):
        if close:
            os.set_blocking(private, True)
        os.dup2(private, fd)
    if close:
        with contextlib.suppress(OSError):
            os.close(private)


@asynccontextmanager
async def stdio(prefix: bytes = b"") -> AsyncIterator[tuple[Any, Any]]:
    """(stdin lines, stdout writer) for ``stdio_server(stdin=..., stdout=...)`` while the
    block runs; either is ``None`` when its descriptor is no pipe or socket (the SDK then
    claims and serves it itself). ``prefix``: bytes already read from stdin (they come
    first). With stdin left to the SDK, the prefix is not used: the caller passes its
    own reader of it."""
    lines: PipeLines | None = None
    out: PipeOut | None = None
    claimed: list[tuple[int, int]] = []
    try:
        if pipe_like(0):
            with contextlib.suppress(OSError):  # no descriptor to spare: the SDK's way
                private = _claim(0, os.O_RDONLY, os.devnull)
                claimed.append((0, private))
                lines = PipeLines(private, prefix)
        if pipe_like(1):
            with contextlib.suppress(OSError):
                private = _claim(1, os.O_WRONLY, 2)
                claimed.append((1, private))
                out = PipeOut(private)
        yield lines, out
    finally:  # nothing awaited here: the block may end cancelled
        drained = out.close() if out is not None else True
        if lines is not None:
            lines.close()
        for fd, private in reversed(claimed):
            _restore(fd, private, close=drained or fd != 1)
