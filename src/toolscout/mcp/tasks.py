"""Tasks (2025-11-25, SEP-1686) passed through: task-augmented tool calls and ``tasks/*``.

A tool keeps its server's ``execution.taskSupport`` in the gateway's listing, and the
gateway declares the ``tasks`` capability (list, cancel, task-augmented ``tools/call``)
on handshake-era connections (the 2026-07-28 revision moved tasks out of the core
protocol). A ``tools/call`` carrying ``task`` runs like any call — entitlement, argument
validation, the audit (its outcome is the task's creation) — over the caller's own
upstream session, with the ``task`` metadata forwarded; the ``CreateTaskResult`` the
upstream answers goes back as it is, and the task id is remembered with its caller and
session. ``tasks/get``, ``tasks/result`` and ``tasks/cancel`` go to the session that
created the task, for its caller only (another caller's task id is unknown, like a
task that never existed); ``tasks/list`` lists the caller's tasks from each session
that holds some. Server-to-client requests an upstream sends while answering
``tasks/result`` (the input a task needs) reach the caller, as during a call.

Not passed through: ``notifications/tasks/status`` (optional in the protocol; the SDK
drops it; clients poll ``tasks/get``), and tasks a client runs for an upstream
(task-augmented sampling and elicitation: the gateway declares no client ``tasks``
capability upstream).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from toolscout.errors import TokenError, ToolscoutError
from toolscout.mcp.connection import Upstream
from toolscout.mcp.meta import CALL, SEARCH, text_result
from toolscout.mcp.relay import LINK
from toolscout.mcp.tools import ToolHandlers
from toolscout.mcp.wire import raw_request
from toolscout.policy import Principal

__all__ = ["TASK_METHODS", "TaskHandlers", "tasks_capability"]

#: the task methods relayed (2025-11-25)
TASK_METHODS = ("tasks/get", "tasks/result", "tasks/cancel", "tasks/list")
#: longest ``tasks/result`` waits for its task to end (the caller may cancel sooner)
RESULT_WAIT_S = 86400.0
#: tasks remembered (task id → its caller and session); the oldest is forgotten past this
MAX_TASKS = 4096


def tasks_capability() -> Any:
    """The ``tasks`` server capability the gateway declares (handshake-era connections)."""
    from mcp.types import (
        ServerTasksCapability,
        ServerTasksRequestsCapability,
        TasksCallCapability,
        TasksCancelCapability,
        TasksListCapability,
        TasksToolsCapability,
    )

    return ServerTasksCapability(
        list=TasksListCapability(),
        cancel=TasksCancelCapability(),
        requests=ServerTasksRequestsCapability(
            tools=TasksToolsCapability(call=TasksCallCapability())
        ),
    )


class TaskHandlers(ToolHandlers):
    """Task-augmented ``tools/call`` (a server middleware) and the ``tasks/*`` handlers."""

    #: task id → (caller key, the upstream session that created it)
    _tasks: OrderedDict[str, tuple[str, Upstream]]

    def install_tasks(self, server: Any) -> None:
        """Register the task handlers and the middleware on the lowlevel ``server``."""
        from mcp.types import GetTaskRequestParams, PaginatedRequestParams

        self._tasks = OrderedDict()
        server.middleware.append(self._task_middleware)
        for method in TASK_METHODS[:3]:
            server.add_request_handler(method, GetTaskRequestParams, self._forwarder(method))
        server.add_request_handler("tasks/list", PaginatedRequestParams, self._list_tasks)

    async def _task_middleware(self, ctx: Any, call_next: Any) -> Any:
        """A ``tools/call`` with ``task`` (handshake-era) runs here; the rest goes on."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        params = ctx.params
        if (
            ctx.method == "tools/call"
            and ctx.request_id is not None
            and isinstance(params, Mapping)
            and isinstance(params.get("task"), Mapping)
            and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        ):
            return await self._call_as_task(ctx, params)
        return await call_next(ctx)

    async def _call_as_task(self, ctx: Any, params: Mapping[str, Any]) -> dict[str, Any]:
        def refused(text: str) -> dict[str, Any]:
            wire: dict[str, Any] = text_result(text, error=True).model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
            return wire

        try:
            principal = self._principal(ctx)
        except TokenError as exc:
            return refused(f"refused ({exc.reason}): {exc}")
        name, args = params.get("name"), params.get("arguments") or {}
        if name == CALL and isinstance(args, Mapping):
            name, args = args.get("name"), args.get("arguments") or {}
        if not isinstance(name, str) or name == SEARCH or not isinstance(args, Mapping):
            return refused("a task-augmented call needs a tool name and an arguments object")
        await self.ready()
        link = self._link(ctx, principal)
        link.task = dict(params["task"])
        token = LINK.set(link)
        try:
            result = await self.ts.aexecute(principal, self.resolve(name), dict(args))
        except ToolscoutError as exc:
            return refused(f"{type(exc).__name__}: {exc}")
        finally:
            LINK.reset(token)
        if not result.ok:
            return refused(f"{result.status} ({result.reason}): {result.message}")
        value = dict(result.value) if isinstance(result.value, Mapping) else {}
        task = value.get("task")
        if isinstance(task, Mapping) and link.task_session is not None:
            self._tasks[str(task.get("taskId"))] = (_key(principal), link.task_session)
            while len(self._tasks) > MAX_TASKS:
                self._tasks.popitem(last=False)
        return {k: v for k, v in value.items() if k != "resultType"}

    def _forwarder(self, method: str) -> Any:
        async def forward(ctx: Any, params: Any) -> dict[str, Any]:
            principal = self._caller(ctx)
            session = self._task_session(principal, str(params.task_id))
            return await self._send(ctx, principal, session, method, {"taskId": params.task_id})

        return forward

    async def _list_tasks(self, ctx: Any, params: Any) -> dict[str, Any]:
        principal = self._caller(ctx)
        mine = {tid for tid, (who, _) in self._tasks.items() if who == _key(principal)}
        sessions = {id(s): s for who, s in self._tasks.values() if who == _key(principal)}
        tasks: list[Any] = []
        for session in sessions.values():
            answer = await self._send(ctx, principal, session, "tasks/list", {})
            tasks += [t for t in answer.get("tasks", []) if t.get("taskId") in mine]
        return {"tasks": tasks}

    def _task_session(self, principal: Principal, task_id: str) -> Upstream:
        from mcp.shared.exceptions import MCPError
        from mcp.types import INVALID_PARAMS

        found = self._tasks.get(task_id)
        if found is None or found[0] != _key(principal):  # unknown and not-yours look alike
            raise MCPError(INVALID_PARAMS, f"unknown task {task_id}")
        return found[1]

    async def _send(
        self, ctx: Any, principal: Principal, session: Upstream, method: str, params: Any
    ) -> dict[str, Any]:
        from mcp.shared.exceptions import MCPError
        from mcp.types import INTERNAL_ERROR

        token = LINK.set(self._link(ctx, principal))
        try:
            # tasks/result waits for the task to end: the task's own time, not a call's
            wait = RESULT_WAIT_S if method == "tasks/result" else None
            answer = await session.raw(method, lambda c: raw_request(c, method, params), wait)
        except ToolscoutError as exc:
            reason = getattr(exc, "reason", "")
            raise MCPError(INTERNAL_ERROR, f"{exc} [{reason}]" if reason else str(exc)) from None
        finally:
            LINK.reset(token)
        return {k: v for k, v in answer.items() if k != "resultType"}


def _key(principal: Principal) -> str:
    return f"{principal.tenant}\x00{principal.subject}"
