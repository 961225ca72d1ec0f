"""A fast-path call's bookkeeping done in the call's own task (round nineteen, h/fwd13).

A call answered below the SDK (:mod:`toolscout.mcp.fastcall`) is an entry of the calls in
flight (a duplicate id goes to the SDK, a ``notifications/cancelled`` naming it is taken
here). The entry used to be dropped by a done callback of the call's task: one more turn
of the event loop per call, after its answer. The task now drops it itself as it ends;
a task cancelled before its first step (its body never runs) is dropped when it is done.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from mcp.server.lowlevel.server import Server
from mcp.types import CallToolResult, TextContent

from toolscout.mcp.fastcall import FastCalls

VERSION = "2026-07-28"


def _line(rid: Any, text: str = "ping") -> str:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": "echo", "arguments": {"text": text}, "_meta": meta}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


def _cancel_line(rid: Any) -> str:
    params = {"requestId": rid, "reason": "the caller gave up"}
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})


class _Handlers:
    def __init__(self) -> None:
        self.server = Server("toolscout", version="0.1.0", title="toolscout gateway")
        self.called: list[str] = []
        self.hold: asyncio.Event | None = None

    async def _call_tool(self, ctx: Any, params: Any) -> CallToolResult:
        self.called.append(params.arguments["text"])
        if self.hold is not None:
            await self.hold.wait()
        return CallToolResult(content=[TextContent(type="text", text=params.arguments["text"])])


class _Out:
    """The caller's stdout: each line written, and whether the call was still in flight
    when it was written (``calls`` set once the FastCalls exists)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.calls: FastCalls | None = None

    async def write(self, text: str) -> None:
        self.lines.append(text)

    async def flush(self) -> None:
        return None


def _fast(handlers: _Handlers) -> tuple[FastCalls, _Out]:
    out = _Out()
    calls = FastCalls(handlers, SimpleNamespace(hook=None), out)  # type: ignore[arg-type]
    calls._era = "modern"  # the connection's first request opened a 2026-07-28 connection
    out.calls = calls
    return calls, out


def test_a_calls_entry_goes_in_the_step_that_writes_its_answer() -> None:
    calls, out = _fast(_Handlers())

    async def run() -> list[tuple[int, bool]]:
        assert calls._offer(_line(7, "a"))
        assert 7 in calls._inflight
        seen: list[tuple[int, bool]] = []  # (answers written, still in flight) each turn
        for _ in range(20):
            seen.append((len(out.lines), 7 in calls._inflight))
            if out.lines and 7 not in calls._inflight:
                break
            await asyncio.sleep(0)
        return seen

    seen = asyncio.run(run())
    assert len(out.lines) == 1 and '"id":7' in out.lines[0]
    # never a turn with the answer written and the entry still there (the done callback's)
    assert all(not (written and inflight) for written, inflight in seen), seen
    assert calls._inflight == {} and calls.answered == 1


def test_an_answered_id_may_be_used_again_at_once() -> None:
    handlers = _Handlers()
    calls, out = _fast(handlers)

    async def run() -> None:
        assert calls._offer(_line(1, "first"))
        for _ in range(20):
            if out.lines:
                break
            await asyncio.sleep(0)
        assert not calls._inflight
        assert calls._offer(_line(1, "second"))  # not a duplicate: taken here again
        await asyncio.wait(list(calls._inflight.values()))

    asyncio.run(run())
    assert handlers.called == ["first", "second"] and len(out.lines) == 2


def test_a_call_cancelled_before_its_first_step_is_dropped_and_never_answered() -> None:
    handlers = _Handlers()
    calls, out = _fast(handlers)

    async def run() -> None:
        # both lines in one chunk of the pipe: the cancellation is offered before the
        # call's task ever ran
        assert calls._offer(_line("x"))
        task = calls._inflight["x"]
        assert calls._offer(_cancel_line("x"))
        await asyncio.wait([task])
        await asyncio.sleep(0)  # its done callback
        assert task.cancelled()

    asyncio.run(run())
    assert calls._inflight == {}
    assert handlers.called == [] and out.lines == [] and calls.cancelled == 1


def test_a_call_cancelled_while_it_runs_is_dropped_and_never_answered() -> None:
    handlers = _Handlers()
    handlers.hold = asyncio.Event()  # never set: the call waits until cancelled
    calls, out = _fast(handlers)

    async def run() -> None:
        assert calls._offer(_line(3))
        task = calls._inflight[3]
        for _ in range(20):
            if handlers.called:
                break
            await asyncio.sleep(0)
        assert handlers.called == ["ping"]
        assert calls._offer(_cancel_line(3))
        await asyncio.wait([task])
        assert 3 not in calls._inflight  # gone as the task ended
        await asyncio.sleep(0)

    asyncio.run(run())
    assert calls._inflight == {} and out.lines == [] and calls.cancelled == 1


def test_a_later_call_with_the_id_of_a_cancelled_one_keeps_its_entry() -> None:
    handlers = _Handlers()
    handlers.hold = asyncio.Event()
    calls, out = _fast(handlers)

    async def run() -> None:
        assert calls._offer(_line(5, "old"))
        old = calls._inflight[5]
        assert calls._offer(_cancel_line(5))
        await asyncio.wait([old])
        assert 5 not in calls._inflight
        assert calls._offer(_line(5, "new"))  # the id again, while the old callback is due
        new = calls._inflight[5]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert calls._inflight.get(5) is new  # the old task's callback left it alone
        handlers.hold.set()  # type: ignore[union-attr]
        await asyncio.wait([new])

    asyncio.run(run())
    assert calls._inflight == {} and len(out.lines) == 1 and '"new"' in out.lines[0]
