"""Input-required rounds: an upstream's questions put to a 2026-07-28 caller.

On a 2026-07-28 connection a server cannot send the client a request; it answers the
client's ``tools/call``, ``prompts/get`` or ``resources/read`` (the only requests that
revision lets carry them) with an ``InputRequiredResult`` (the questions: sampling,
elicitation, roots) and the client retries it with the answers and the echoed
``requestState``. An upstream on a handshake-era connection asks the gateway
mid-call, and waits. :class:`Rounds` joins the two: the call runs in the background;
when its upstream asks, the caller's request is answered with the question and an
unguessable ``requestState`` naming the waiting call (bound to its caller); the
retry carrying the answer resumes that call, which then finishes or asks again.
A call nobody resumes within :data:`ROUND_TTL_S` is cancelled (and the upstream told).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Coroutine
from typing import Any

from toolscout.mcp.relay import Link

__all__ = ["ROUND_TTL_S", "Rounds"]

#: seconds a call waits for its caller to come back with the answers
ROUND_TTL_S = 600.0
#: suspended calls kept at most (the oldest is cancelled past this)
MAX_ROUNDS = 1024


class _Round:
    """One call waiting for its caller's answers."""

    def __init__(self, caller: str, link: Link) -> None:
        self.caller = caller
        self.link = link
        self.task: asyncio.Task[Any] | None = None
        #: questions not yet put to the caller, in the order asked
        self.asked: list[tuple[str, Any]] = []
        self.waiting: dict[str, tuple[asyncio.Future[Any], type[Any]]] = {}
        self.since = time.monotonic()
        self._n = 0
        #: set when the call ends or asks (what :meth:`Rounds._wait` sleeps on)
        self._wake: asyncio.Future[None] | None = None

    def start(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(coro))
        self.task.add_done_callback(self._poke)  # also a call cancelled before it started

    async def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """The call, the waiting request woken as it ends: on the loop's next turn, where a
        done callback would wake it one turn later (the task is done by then all the same:
        nothing runs between this ``finally`` and the task's end)."""
        try:
            return await coro
        finally:
            self._poke()

    def _poke(self, _: object = None) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def ask(self, request: Any, result_type: type[Any]) -> Any:
        """The upstream's question: put to the caller with the next answer; its answer."""
        self._n += 1
        key = f"q{self._n}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting[key] = (future, result_type)
        self.asked.append((key, request))
        self._poke()
        return await future

    async def settled(self) -> None:
        """Until the call ended or asked something (no task, no queue: one future)."""
        assert self.task is not None
        if self.asked or self.task.done():
            return
        self._wake = asyncio.get_running_loop().create_future()
        try:
            await self._wake
        finally:
            self._wake = None

    def answer(self, responses: dict[str, Any]) -> None:
        for key, response in responses.items():
            future, result_type = self.waiting.pop(key, (None, None))
            if future is None or result_type is None or future.done():
                continue
            data = (
                response.model_dump(mode="json", by_alias=True, exclude_none=True)
                if hasattr(response, "model_dump")
                else response
            )
            try:
                future.set_result(result_type.model_validate(data))
            except Exception as exc:  # a malformed answer fails that question upstream
                future.set_exception(exc)

    def cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()


class Rounds:
    """The calls of 2026-07-28 callers that wait for answers, by ``requestState``."""

    def __init__(self) -> None:
        self._waiting: dict[str, _Round] = {}

    async def run(
        self,
        caller: str,
        link: Link,
        params: Any,
        start: Callable[[], Coroutine[Any, Any, Any]],
    ) -> Any:
        """The call's result, or an ``InputRequiredResult`` with its upstream's questions.

        A retry (``params.request_state`` naming this caller's waiting call) resumes that
        call with ``params.input_responses``; else ``start()`` begins a new one (with
        ``link`` asking through this round). A caller whose client declared none of the
        capabilities an upstream may ask for (``link.capabilities``) is never asked (the
        relay asks only a client that declared the capability, and answers the upstream an
        error otherwise): its call runs in the request's own task, with no round."""
        self._expire()
        state = getattr(params, "request_state", None)
        if state is not None:
            from mcp.shared.exceptions import MCPError
            from mcp.types import INVALID_PARAMS

            found = self._waiting.pop(state, None)
            if found is None or found.caller != caller:
                raise MCPError(INVALID_PARAMS, "unknown or expired requestState")
            found.link.ctx = link.ctx  # progress and logs now go to this request
            found.answer(dict(getattr(params, "input_responses", None) or {}))
            return await self._wait(found)
        if not link.capabilities:
            return await start()
        current = _Round(caller, link)
        link.asker = current.ask
        current.start(start())
        return await self._wait(current)

    async def _wait(self, current: _Round) -> Any:
        assert current.task is not None
        try:
            await current.settled()
        except asyncio.CancelledError:
            current.cancel()  # the caller went away mid-round
            raise
        if not current.asked:  # the call ended: the round is over
            current.link.asker = None  # the link's cycle through this round, broken
            return current.task.result()
        from mcp.types import InputRequiredResult

        asked = dict(current.asked)
        current.asked.clear()
        state = secrets.token_urlsafe(24)
        current.since = time.monotonic()
        self._waiting[state] = current
        while len(self._waiting) > MAX_ROUNDS:
            oldest = next(iter(self._waiting))
            self._waiting.pop(oldest).cancel()
        return InputRequiredResult(input_requests=asked, request_state=state)

    def _expire(self) -> None:
        now = time.monotonic()
        for state, waiting in list(self._waiting.items()):
            if now - waiting.since > ROUND_TTL_S:
                self._waiting.pop(state, None)
                waiting.cancel()
