"""A bare stdio pass-through: the floor under the MCP gateway's forwarding overhead.

``python benchmarks/line_proxy.py CMD [ARGS...]`` spawns ``CMD`` and copies bytes both ways
(this process's stdin to the child's stdin, the child's stdout to this process's stdout) on
an asyncio event loop, as they arrive: no parsing, no checks, no audit. A call through it
costs what any extra process on the path costs — two more wake-ups of a process and two
more pipe hops — and nothing of the gateway's own work, so
``benchmarks/mcp_gateway.py --only-forwarding --floor`` calls the upstream through it in
the same turns as through the gateway: the gateway's overhead minus this one is the
gateway's own share at that moment's load.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any


class _Copy(asyncio.Protocol):
    """Bytes read from one pipe written to another transport as they arrive."""

    def __init__(self, to: asyncio.WriteTransport, done: asyncio.Future[None]) -> None:
        self.to, self.done = to, done

    def data_received(self, data: bytes) -> None:
        self.to.write(data)

    def eof_received(self) -> bool:
        if self.to.can_write_eof():
            self.to.write_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


class _Child(asyncio.SubprocessProtocol):
    """The child's stdout copied to this process's stdout."""

    def __init__(self, out: asyncio.WriteTransport, done: asyncio.Future[None]) -> None:
        self.out, self.done = out, done

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self.out.write(data)

    def process_exited(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def main(argv: list[str]) -> int:
    if not argv:
        print("usage: line_proxy.py CMD [ARGS...]", file=sys.stderr)
        return 2
    loop = asyncio.get_running_loop()
    stdout = os.fdopen(sys.stdout.fileno(), "wb", buffering=0, closefd=False)
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, stdout)
    exited: asyncio.Future[None] = loop.create_future()
    child: Any
    child, _ = await loop.subprocess_exec(
        lambda: _Child(out, exited), *argv, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=None,
    )  # fmt: skip
    stdin_closed: asyncio.Future[None] = loop.create_future()
    to_child = child.get_pipe_transport(0)
    stdin = os.fdopen(sys.stdin.fileno(), "rb", buffering=0, closefd=False)
    await loop.connect_read_pipe(lambda: _Copy(to_child, stdin_closed), stdin)
    await asyncio.wait([exited, stdin_closed], return_when=asyncio.FIRST_COMPLETED)
    if not exited.done():  # the caller went: the child gets its stdin's end, then a signal
        to_child.close()
        try:
            await asyncio.wait_for(asyncio.shield(exited), 5.0)
        except TimeoutError:
            child.terminate()
    code = child.get_returncode()
    child.close()
    return code or 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
