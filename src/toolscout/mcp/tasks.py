"""Tasks (2025-11-25, SEP-1686) passed through: task-augmented tool calls and ``tasks/*``.

A tool keeps its server's ``execution.taskSupport`` in the gateway's listing, and the
gateway declares the ``tasks`` capability (list, cancel, task-augmented ``tools/call``)
on handshake-era connections (the 2026-07-28 revision moved tasks out of the core
protocol). A ``tools/call`` carrying ``task`` runs like any call — entitlement, argument
validation, the audit (its outcome is the task's creation) — over the caller's own
upstream session, with the ``task`` metadata forwarded.

**Task ids are named per server**: the caller sees ``<server>/<upstream task id>`` (with
``~2``, ``~3``... appended in the rare case the caller already holds that name for a
task of another session of the same server), so two upstreams, or two callers' sessions
of one upstream, that hand out the same id never collide. Each gateway id is remembered
with its caller, the upstream session and id behind it, and the caller's session that
created it. ``tasks/get``, ``tasks/result`` and ``tasks/cancel`` go to that upstream
session with the upstream's id, for that caller only (another caller's task id is
unknown, like a task that never existed); ``tasks/list`` lists the caller's tasks from
each session that holds some. Every task id in an answer (``taskId``, ``task.taskId``,
the related-task ``_meta``) is the gateway's. Server-to-client requests an upstream
sends while answering ``tasks/result`` (the input a task needs) reach the caller, as
during a call.

``notifications/tasks/status`` from an upstream goes to the caller session that created
the task, and to no other (renamed like the answers); one that arrives before the
upstream's ``CreateTaskResult`` has been read is held until it has.

Not passed through: tasks a client runs for an upstream (task-augmented sampling and
elicitation: the gateway declares no client ``tasks`` capability upstream).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolscout.errors import TokenError, ToolscoutError
from toolscout.mcp.callers import caller_key
from toolscout.mcp.connection import Upstream
from toolscout.mcp.meta import CALL, SEARCH, text_result
from toolscout.mcp.relay import LINK
from toolscout.mcp.supervisor import TASK_STATUS
from toolscout.mcp.tools import ToolHandlers
from toolscout.mcp.wire import raw_request
from toolscout.policy import Principal

__all__ = ["TASK_METHODS", "TaskHandlers", "tasks_capability"]

#: the task methods relayed (2025-11-25)
TASK_METHODS = ("tasks/get", "tasks/result", "tasks/cancel", "tasks/list")
#: longest ``tasks/result`` waits for its task to end (the caller may cancel sooner)
RESULT_WAIT_S = 86400.0
#: tasks remembered (gateway id → its caller and session); the oldest is forgotten past this
MAX_TASKS = 4096
#: status notices held for tasks whose creation has not been read yet (per task, tasks)
EARLY_PER_TASK, EARLY_TASKS = 16, 256
#: where a result names the task it belongs to
RELATED_TASK = "io.modelcontextprotocol/related-task"


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


@dataclass(eq=False)
class _Task:
    """One task a caller created through the gateway."""

    caller: str
    gateway_id: str
    #: the upstream session that created it, and its id there
    session: Upstream
    upstream_id: str
    #: the caller's client session that created it (its status notices go there)
    client: Any


class TaskHandlers(ToolHandlers):
    """Task-augmented ``tools/call`` (a server middleware) and the ``tasks/*`` handlers."""

    #: (caller key, gateway task id) → the task
    _tasks: OrderedDict[tuple[str, str], _Task]
    #: (upstream session, upstream task id) → the task
    _task_ids: dict[tuple[Upstream, str], _Task]
    #: status notices of tasks not known yet (their creation is being read)
    _early: OrderedDict[tuple[Upstream, str], list[dict[str, Any]]]

    def install_tasks(self, server: Any) -> None:
        """Register the task handlers and the middleware on the lowlevel ``server``."""
        from mcp.types import GetTaskRequestParams, PaginatedRequestParams

        self._tasks, self._task_ids, self._early = OrderedDict(), {}, OrderedDict()
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
        created = value.get("task")
        if isinstance(created, Mapping) and link.task_session is not None:
            task = await self._remember(
                caller_key(principal), link.task_session, str(created.get("taskId")), ctx.session
            )
            value = _renamed(value, task.gateway_id)
        return {k: v for k, v in value.items() if k != "resultType"}

    async def _remember(
        self, caller: str, session: Upstream, upstream_id: str, client: Any
    ) -> _Task:
        """Name a new task for its caller (``<server>/<id>``), remember it, and pass on the
        status notices that came before its creation was read."""
        known = self._task_ids.get((session, upstream_id))
        if known is not None and known.caller == caller:
            gid = known.gateway_id  # the upstream reused an id of this session: the same name
        else:
            base = gid = session.config.prefix + upstream_id
            n = 1
            while (caller, gid) in self._tasks:  # held by a task of another session
                n += 1
                gid = f"{base}~{n}"
        task = _Task(caller, gid, session, upstream_id, client)
        self._tasks[(caller, gid)] = task
        self._tasks.move_to_end((caller, gid))
        self._task_ids[(session, upstream_id)] = task
        while len(self._tasks) > MAX_TASKS:
            _, old = self._tasks.popitem(last=False)
            if self._task_ids.get((old.session, old.upstream_id)) is old:
                del self._task_ids[(old.session, old.upstream_id)]
        for params in self._early.pop((session, upstream_id), []):
            await _tell(task, params)
        return task

    async def _on_upstream_notice(self, up: Upstream, message: Any) -> None:
        """A task's status goes to the caller session that created the task; the rest on."""
        if message.method != TASK_STATUS:
            await super()._on_upstream_notice(up, message)
            return
        params = dict(message.params)
        key = (up, str(params.get("taskId")))
        task = self._task_ids.get(key)
        if task is not None:
            await _tell(task, params)
            return
        held = self._early.setdefault(key, [])  # its creation is still being read
        held[:] = [*held, params][-EARLY_PER_TASK:]
        while len(self._early) > EARLY_TASKS:
            self._early.popitem(last=False)

    def _forwarder(self, method: str) -> Any:
        async def forward(ctx: Any, params: Any) -> dict[str, Any]:
            principal = self._caller(ctx)
            task = self._task_of(principal, str(params.task_id))
            answer = await self._send(
                ctx, principal, task.session, method, {"taskId": task.upstream_id}
            )
            return _renamed(answer, task.gateway_id)

        return forward

    async def _list_tasks(self, ctx: Any, params: Any) -> dict[str, Any]:
        principal = self._caller(ctx)
        mine = {
            (t.session, t.upstream_id): t for (who, _), t in self._tasks.items()
            if who == caller_key(principal)
        }  # fmt: skip
        sessions = {id(session): session for session, _ in mine}
        tasks: list[Any] = []
        for session in sessions.values():
            cursor: str | None = None
            for _ in range(100):  # every page
                ask = {"cursor": cursor} if cursor else {}
                answer = await self._send(ctx, principal, session, "tasks/list", ask)
                for listed in answer.get("tasks", []):
                    task = mine.get((session, str(listed.get("taskId"))))
                    if task is not None:
                        tasks.append(_renamed(listed, task.gateway_id))
                cursor = answer.get("nextCursor")
                if not cursor:
                    break
        return {"tasks": tasks}

    def _task_of(self, principal: Principal, task_id: str) -> _Task:
        from mcp.shared.exceptions import MCPError
        from mcp.types import INVALID_PARAMS

        found = self._tasks.get((caller_key(principal), task_id))
        if found is None:  # unknown and not-yours look alike
            raise MCPError(INVALID_PARAMS, f"unknown task {task_id}")
        return found

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


def _renamed(value: Mapping[str, Any], gateway_id: str) -> dict[str, Any]:
    """``value`` with the task id it carries (``taskId``, ``task.taskId``, the related-task
    ``_meta``) replaced by the gateway's."""
    out = dict(value)
    if "taskId" in out:
        out["taskId"] = gateway_id
    task = out.get("task")
    if isinstance(task, Mapping) and "taskId" in task:
        out["task"] = {**task, "taskId": gateway_id}
    meta = out.get("_meta")
    if isinstance(meta, Mapping) and isinstance(meta.get(RELATED_TASK), Mapping):
        out["_meta"] = {**meta, RELATED_TASK: {**meta[RELATED_TASK], "taskId": gateway_id}}
    return out


async def _tell(task: _Task, params: Mapping[str, Any]) -> None:
    """Send one task status notice to the caller session that created the task."""
    from mcp.types import TaskStatusNotification

    with contextlib.suppress(Exception):  # a malformed notice or a gone client: dropped
        notice = TaskStatusNotification.model_validate(
            {"method": TASK_STATUS, "params": _renamed(params, task.gateway_id)}
        )
        await task.client.send_notification(notice)
