"""The requests sent to one upstream MCP server: its tools' calls and the pass-through.

An :class:`Upstream` is a :class:`~toolscout.mcp.supervisor.Supervisor` (the connection
kept up in the background, its tools listed as cards) with the call path on top: a
request (:meth:`Upstream.call`, :meth:`Upstream.request`, :meth:`Upstream.raw`) runs under
a deadline that progress moves, within this server's argument- and result-size caps, and
every upstream fault becomes an :class:`~toolscout.errors.ExecutorError` naming the
server. A request that finds the server down waits for it within its start-up window,
and asks a remote one to reconnect at once (``Supervisor.reconnect_now``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TextIO

from toolscout.cards import ToolSpec
from toolscout.errors import ExecutorError
from toolscout.mcp.config import ServerConfig
from toolscout.mcp.relay import LINK, Link
from toolscout.mcp.sdk import sdk_names
from toolscout.mcp.supervisor import POLL_S, RECONNECT_WAIT_S, Supervisor
from toolscout.mcp.wire import describe, raw_request, redacted, wire
from toolscout.redact import redact

__all__ = ["UPSTREAM_UNAVAILABLE", "Upstream"]

# reason codes of the ExecutorErrors raised here (the executors' own codes, same values)
TOOL_FAILED = "tool_failed"
RESPONSE_TOO_LARGE = "response_too_large"
UPSTREAM_UNAVAILABLE = "upstream_unavailable"
UPSTREAM_TIMEOUT = "upstream_timeout"


class Upstream(Supervisor):
    """One upstream server: its supervised connection, its tools, its calls."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        max_result_bytes: int = 16 * 1024 * 1024,
        max_argument_bytes: int = 4 * 1024 * 1024,
        on_tools: Callable[[Upstream], Awaitable[None]] | None = None,
        errlog: TextIO | None = None,
        poll_s: float = POLL_S,
        on_notify: Callable[[Upstream, Any], Awaitable[None]] | None = None,
        capabilities: frozenset[str] | None = None,
    ) -> None:
        super().__init__(
            config,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            on_tools=on_tools,
            errlog=errlog,
            poll_s=poll_s,
            on_notify=on_notify,
            capabilities=capabilities,
        )
        self.max_result_bytes = max_result_bytes
        self.max_argument_bytes = max_argument_bytes

    def unavailable(self, tool: str, why: str) -> ExecutorError:
        if self.state == "connecting" and not self.listed.is_set():
            why = (
                f"still starting: not up within connect_timeout_s={self.connect_timeout_s:g}s, "
                "its tools appear when it is"
            )
        return ExecutorError(
            f"upstream {self.label} is unavailable ({why}); its other tools fail the same way "
            "until it reconnects",
            tool_id=tool,
            reason=UPSTREAM_UNAVAILABLE,
        )

    async def raw(
        self, what: str, send: Callable[[Any], Awaitable[Any]], timeout_s: float | None = None
    ) -> Any:
        """One request upstream, its answer as the SDK gives it (within ``timeout_s``, by
        default the server's, moved by progress)."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        return await self._send(what, what, send, timeout, LINK.get())

    async def request(self, what: str, send: Callable[[Any], Awaitable[Any]]) -> dict[str, Any]:
        """One pass-through request (a resource read, a prompt): its result as a wire dict."""
        result = await self._send(what, what, send, self.timeout_s, LINK.get())
        answer = wire(result)
        self._check_size(what, what, answer, self.max_result_bytes)
        return answer

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run one tool; the MCP ``CallToolResult`` as a wire dict, or ExecutorError.

        The caller's progress reaches it (through :data:`~toolscout.mcp.relay.LINK`) and
        moves the deadline: the call fails only after ``timeout_s`` without progress."""
        from toolscout.gateway.limits import check_argument_size

        tid = spec.id
        tool = self.tools.get(tid)
        name = tool.name if tool is not None else spec.card.name
        size = len(_COMPACT(dict(arguments)).encode())
        check_argument_size(size, self.max_argument_bytes, tool_id=tid)  # this server's cap
        link = LINK.get()
        timeout = self.timeout_for(name)

        async def send(client: Any) -> Any:
            progress = link.progress if link is not None else None
            lean = self._lean
            if lean is not None and lean.open:  # written and read below the SDK's session
                return await lean.call_tool(client, name, dict(arguments), progress)
            return await client.call_tool(name, dict(arguments), progress_callback=progress)

        if link is not None and link.task is not None:  # a task-augmented call (2025-11-25)
            params = {"name": name, "arguments": dict(arguments), "task": link.task}
            answer: dict[str, Any] = await self._send(
                tid, repr(name), lambda c: raw_request(c, "tools/call", params), timeout, link
            )
            self._check_size(tid, None, answer, self.max_result_bytes)
            if "task" in answer:  # the task the upstream created: its later requests come here
                link.task_session = self
                return answer
            is_error = bool(answer.get("isError"))
        else:
            result = await self._send(tid, repr(name), send, timeout, link)
            answer = wire(result)
            self._check_size(tid, None, answer, self.max_result_bytes)
            is_error = bool(result.is_error)
        if is_error:
            clean = redacted(answer)
            texts = [b.get("text", "") for b in clean.get("content", []) if "text" in b]
            if link is not None:
                link.error = clean
            raise ExecutorError(
                f"{tid} failed upstream ({self.name}): {' '.join(texts)}",
                tool_id=tid,
                reason=TOOL_FAILED,
                detail=" ".join(texts),
            )
        return answer

    def timeout_for(self, tool: str) -> float:
        """The time-out of one tool: its own rule's, else the server's, else the gateway's."""
        own = self.config.policy.timeout_for(tool)
        return own if own is not None else self.timeout_s

    async def _send(
        self,
        what_id: str,
        what: str,
        send: Callable[[Any], Awaitable[Any]],
        timeout: float,
        link: Link | None,
    ) -> Any:
        """One request upstream: faults as ExecutorErrors; the deadline moves with progress."""
        if self.state != "up":
            await self.until_up()  # a request right after start-up waits for the server
            if self.state != "up" and self.config.url:  # a remote server that went down
                await self.reconnect_now(min(RECONNECT_WAIT_S, timeout))
        client = self._client
        if client is None or self.state != "up":
            raise self.unavailable(what_id, self.last_error or self.state)
        if link is not None:
            self.relay.active.append(link)
        names = sdk_names()
        try:
            # run in this task (no task of its own, no wait): a timer checks for progress at
            # the end of each window and expires the scope when there was none
            async with asyncio.timeout(None) as scope:
                deadline = _Deadline(scope, link, lambda: self._window(what_id), timeout)
                try:
                    return await send(client)  # cancelled here, it tells the upstream
                finally:
                    deadline.cancel()
        except TimeoutError:
            raise ExecutorError(
                f"upstream {self.label} did not answer {what} within {self._window(what_id):g}s "
                "(no progress either); raise timeout_s for this server or tool",
                tool_id=what_id,
                reason=UPSTREAM_TIMEOUT,
            ) from None
        except names.MCPError as exc:
            if exc.code == names.CONNECTION_CLOSED:
                self.last_error = "the connection closed"
                self._broken.set()
                raise self.unavailable(what_id, self.last_error) from None
            text = redact(str(exc))
            raise ExecutorError(
                f"upstream {self.label} refused {what}: {text}",
                tool_id=what_id,
                reason=TOOL_FAILED,
                detail=text,
            ) from None
        except asyncio.CancelledError:
            raise
        except names.ValidationError as exc:  # a malformed answer: the request fails, not the link
            text = redact(describe(exc))
            raise ExecutorError(
                f"upstream {self.label} answered {what} with a malformed result: {text}",
                tool_id=what_id,
                reason=TOOL_FAILED,
                detail=text,
            ) from None
        except Exception as exc:
            self.last_error = redact(describe(exc))
            self._broken.set()
            raise self.unavailable(what_id, self.last_error) from None
        finally:
            if link is not None and link in self.relay.active:
                self.relay.active.remove(link)

    def _window(self, what_id: str) -> float:
        tool = self.tools.get(what_id)
        return self.timeout_for(tool.name) if tool is not None else self.timeout_s

    @staticmethod
    def _check_size(what_id: str, what: str | None, wire: dict[str, Any], cap: int) -> None:
        """``wire`` within ``cap`` bytes of compact JSON (``what``: what it is, by default
        the result of ``what_id``)."""
        size = len(_COMPACT(wire).encode())
        if size > cap:
            what = what if what is not None else f"the result of {what_id}"
            raise ExecutorError(
                f"{what} is {size} bytes, over this server's max_result_bytes ({cap}); raise it "
                "in the server's toolscout section",
                tool_id=what_id,
                reason=RESPONSE_TOO_LARGE,
            )


#: compact JSON, as ``json.dumps(x, separators=(",", ":"))`` (which builds one per call)
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode


class _Deadline:
    """A request's deadline that progress moves: at the end of each window, a window
    without progress expires ``scope`` (the request is cancelled: ``TimeoutError``);
    progress starts the next window from the last sign of life (``link.last_seen``).

    An object rather than a closure that re-arms itself: such a closure refers to itself
    (a reference cycle that kept every call's link, context and session alive until the
    collector ran); :meth:`cancel` drops the only reference the loop holds."""

    __slots__ = ("_link", "_loop", "_scope", "_started", "_timer", "_window")

    def __init__(
        self, scope: asyncio.Timeout, link: Link | None, window: Callable[[], float], first: float
    ) -> None:
        self._scope, self._link, self._window = scope, link, window
        self._loop = asyncio.get_running_loop()
        self._started = time.monotonic()
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(first, self._check)

    def _check(self) -> None:
        seen = self._link.last_seen if self._link is not None else 0.0
        if seen <= self._started:  # no progress within the whole window
            self._timer = None
            self._scope.reschedule(self._loop.time())  # cancels the request: TimeoutError
            return
        self._started = time.monotonic()
        window = max(0.01, seen + self._window() - self._started)
        self._timer = self._loop.call_later(window, self._check)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
