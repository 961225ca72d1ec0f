"""The gateway's caller-facing stdio on the event loop (``toolscout.mcp.pipes``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from toolscout.mcp.pipes import PipeLines, PipeOut, pipe_like

SRC = str(Path(__file__).resolve().parents[1] / "src")


def test_lines_come_after_the_prefix_and_end_at_eof() -> None:
    async def main() -> list[str]:
        r, w = os.pipe()
        try:
            # the prefix ends mid-line: its tail and the pipe's first bytes are one line
            lines = PipeLines(r, prefix=b'{"a": 1}\n{"b":')
            os.write(w, ' 2}\n{"c": "\u00e9"}\n'.encode())
            os.close(w)
            got = [line async for line in lines]
            lines.close()
            return got
        finally:
            os.close(r)

    assert asyncio.run(main()) == ['{"a": 1}\n', '{"b": 2}\n', '{"c": "\u00e9"}\n']


def test_a_long_line_is_read_whole() -> None:
    big = "x" * (3 * 1024 * 1024)

    async def main() -> list[str]:
        r, w = os.pipe()
        loop = asyncio.get_running_loop()

        def feed() -> None:
            with os.fdopen(w, "wb") as f:
                f.write(big.encode() + b"\n")

        try:
            lines = PipeLines(r)
            writer = loop.run_in_executor(None, feed)
            got = [line async for line in lines]
            await writer
            lines.close()
            return got
        finally:
            os.close(r)

    assert asyncio.run(main()) == [big + "\n"]


def test_out_writes_reach_the_pipe_on_flush() -> None:
    async def main() -> bytes:
        r, w = os.pipe()
        try:
            out = PipeOut(w)
            await out.write('{"id": 1}\n')
            await out.write("\u00e9\n")
            await out.flush()
            out.close()
            return os.read(r, 100)
        finally:
            os.close(r)
            os.close(w)

    assert asyncio.run(main()) == '{"id": 1}\n\u00e9\n'.encode()


def test_two_writers_at_once_share_one_transport() -> None:
    """The SDK's writer and the fast path (``mcp/fastcall.py``) may write the first line at
    the same time: the pipe is opened once, both lines arrive whole."""

    async def main() -> tuple[bytes, bool]:
        r, w = os.pipe()
        try:
            out = PipeOut(w)
            await asyncio.gather(out.write('{"id": 1}\n'), out.write('{"id": 2}\n'))
            await out.flush()
            one = out._writer
            await out.write('{"id": 3}\n')
            await out.flush()
            same = out._writer is one
            out.close()
            return os.read(r, 100), same
        finally:
            os.close(r)
            os.close(w)

    data, same = asyncio.run(main())
    assert same
    assert sorted(data.decode().splitlines()) == ['{"id": 1}', '{"id": 2}', '{"id": 3}']


def test_only_pipes_and_sockets_of_their_own_qualify(tmp_path: Path) -> None:
    r, w = os.pipe()
    try:
        assert pipe_like(r) and pipe_like(w)
    finally:
        os.close(r)
        os.close(w)
    with open(tmp_path / "file", "wb") as f:
        assert not pipe_like(f.fileno())  # a file: left to the SDK's threads
    assert not pipe_like(10_000)  # no such descriptor


CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from toolscout.mcp import pipes

    async def main():
        async with pipes.stdio(b"first\\n") as (lines, out):
            print("stray", flush=True)  # fd 1 points at stderr while serving
            async for line in lines:
                await out.write("got " + line)
                await out.flush()
        print("after", flush=True)  # fd 1 is the wire again

    asyncio.run(main())
    """
)


def test_stdio_claims_the_wire_and_gives_it_back() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=b"second\nthird\n",
        capture_output=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=60,
        check=True,
    )
    assert proc.stdout == b"got first\ngot second\ngot third\nafter\n"
    assert b"stray" in proc.stderr


def test_stdio_leaves_a_pipe_shared_with_stderr_to_the_sdk() -> None:
    child = textwrap.dedent(
        """
        import asyncio
        from toolscout.mcp import pipes

        async def main():
            async with pipes.stdio() as (lines, out):
                print(lines is None, out is None, flush=True)

        asyncio.run(main())
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", child],
        input=b"",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # 2>&1: stdout must stay blocking, so not claimed
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=60,
        check=True,
    )
    assert proc.stdout.split() == [b"False", b"True"]
