"""Executors: how the gateway actually runs a tool once every check has passed.

:class:`Executor` is the seam. Implementations ship in their own modules:

* :class:`~toolscout.executors.python.PythonExecutor` — a registry of Python
  callables; :func:`~toolscout.executors.python.tool` derives each one's card and
  JSON Schema from its signature and docstring. Sync callables run on the
  executor's own bounded thread pool.
* :class:`~toolscout.executors.http.HTTPExecutor` — one
  :class:`~toolscout.executors.http.HTTPEndpoint` per tool, over ``httpx``.
* :class:`~toolscout.executors.mcp.MCPExecutor` — an upstream MCP server over
  stdio or streamable HTTP through the ``mcp`` SDK.
* :class:`DryRunExecutor` (here) — runs nothing, echoes the allowed call.

Executors never check policy or validate arguments — the gateway has done both.
Failures surface as :class:`ExecutorError` with a stable reason and a message
safe for the caller; what went wrong inside (exception text, upstream bodies)
is in the error's ``detail``, which the gateway keeps in the audit only.
Connections are held per event loop by a background task (:class:`PerLoop`),
so they survive across calls and close cleanly with the loop.

``PythonExecutor``, ``tool``, ``HTTPEndpoint`` and ``HTTPExecutor`` can still be
imported from this module.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from toolscout.cards import ToolSpec

if TYPE_CHECKING:  # moved; still importable from here (see __getattr__)
    from toolscout.executors.http import HTTPEndpoint, HTTPExecutor
    from toolscout.executors.python import SPEC_ATTR, PythonExecutor, tool

__all__ = [
    "SPEC_ATTR",
    "DryRunExecutor",
    "Executor",
    "HTTPEndpoint",
    "HTTPExecutor",
    "PerLoop",
    "PythonExecutor",
    "clip",
    "tool",
]

T = TypeVar("T")

#: reason codes of :class:`~toolscout.errors.ExecutorError`
NOT_BOUND = "executor_not_bound"
TOOL_FAILED = "tool_failed"
HTTP_STATUS = "http_status"
HTTP_ERROR = "http_error"
REDIRECT_REFUSED = "redirect_refused"
RESPONSE_TOO_LARGE = "response_too_large"
UPSTREAM_UNAVAILABLE = "upstream_unavailable"
BAD_URL_ARGUMENT = "invalid_url_argument"
EXECUTOR_BUSY = "executor_busy"

_MOVED = {
    "PythonExecutor": "toolscout.executors.python",
    "tool": "toolscout.executors.python",
    "SPEC_ATTR": "toolscout.executors.python",
    "HTTPEndpoint": "toolscout.executors.http",
    "HTTPExecutor": "toolscout.executors.http",
}


def __getattr__(name: str) -> Any:
    """The executors that moved to their own modules, still importable from here."""
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def clip(text: object, limit: int = 500) -> str:
    """``text`` as a string of at most ``limit`` characters (for error details)."""
    if isinstance(text, BaseException):
        out = f"{type(text).__name__}: {text}"
    else:
        out = text if isinstance(text, str) else repr(text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


@runtime_checkable
class Executor(Protocol):
    """Runs one already-authorised, already-validated tool call."""

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        """The tool's result (JSON-serialisable), or :class:`ExecutorError`."""
        ...

    async def aclose(self) -> None:
        """Release connections and processes; the executor may be used again after."""
        ...


# --------------------------------------------------------------------------- per-loop resources


@dataclass(eq=False)
class _Held(Generic[T]):
    ready: asyncio.Event
    stop: asyncio.Event
    task: asyncio.Task[None] | None = None
    value: T | None = None
    error: BaseException | None = None


class PerLoop(Generic[T]):
    """An async context-managed resource, entered by a background task per event loop.

    The task enters the context and waits; calls from any task on that loop
    share the value. When the loop shuts down (``asyncio.run`` cancels its
    tasks) the context is exited in the task that entered it, as anyio needs.
    """

    def __init__(self, factory: Callable[[], AbstractAsyncContextManager[T]]) -> None:
        self._factory = factory
        self._guard = threading.Lock()
        self._held: dict[asyncio.AbstractEventLoop, _Held[T]] = {}
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}

    async def _hold(self, held: _Held[T]) -> None:
        try:
            async with self._factory() as value:
                held.value = value
                held.ready.set()
                await held.stop.wait()
        except asyncio.CancelledError:
            held.error = ConnectionError("the event loop is shutting down")
            raise
        except Exception as exc:
            held.error = exc
        finally:
            if held.error is None:
                held.error = ConnectionError("the connection was closed")
            held.ready.set()

    async def get(self) -> T:
        loop = asyncio.get_running_loop()
        with self._guard:
            for old in [lp for lp in self._held if lp.is_closed()]:
                del self._held[old]
                self._locks.pop(old, None)
            lock = self._locks.setdefault(loop, asyncio.Lock())
        async with lock:
            held = self._held.get(loop)
            if held is None or (held.task is not None and held.task.done()):
                held = _Held(asyncio.Event(), asyncio.Event())
                held.task = loop.create_task(self._hold(held))
                self._held[loop] = held
            await held.ready.wait()
        if held.value is None or (held.task is not None and held.task.done()):
            with self._guard:
                if self._held.get(loop) is held:
                    del self._held[loop]
            raise held.error or ConnectionError("connection failed")
        return held.value

    async def reset(self) -> None:
        """Close this loop's resource; the next :meth:`get` opens a new one."""
        loop = asyncio.get_running_loop()
        with self._guard:
            held = self._held.pop(loop, None)
        if held is not None and held.task is not None:
            held.stop.set()
            await asyncio.gather(held.task, return_exceptions=True)

    async def aclose(self) -> None:
        """Close the resource on this loop and ask other live loops to close theirs."""
        with self._guard:
            others = [
                (lp, h) for lp, h in self._held.items() if lp is not asyncio.get_running_loop()
            ]
            for lp, _ in others:
                del self._held[lp]
        for lp, h in others:
            if not lp.is_closed():
                lp.call_soon_threadsafe(h.stop.set)
        await self.reset()


class DryRunExecutor:
    """Runs nothing: answers with the call the gateway allowed, for rehearsing policy.

    What ``toolscout call --dry-run`` binds every tool to, so a catalog's
    entitlements, validation and audit can be exercised before real executors exist.
    """

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        return {"dry_run": True, "tool": spec.id, "arguments": dict(arguments)}

    async def aclose(self) -> None:
        return None
