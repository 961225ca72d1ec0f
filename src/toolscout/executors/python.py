"""A :class:`ToolSpec` derived from a Python function's signature and docstring.

The summary is the docstring's first line; parameter descriptions come from a
Google-style ``Args:`` section or Sphinx ``:param name:`` lines; the JSON Schema
comes from the type hints: ``str``/``int``/``float``/``bool``, ``list[X]``,
``tuple[X, ...]``, ``set[X]``, ``dict[str, X]``, ``X | None``/``Optional[X]``,
unions, ``Literal[...]``, ``Enum`` subclasses and ``Annotated[X, "description"]``.
Defaults become ``default`` and make a parameter optional. The schema sets
``additionalProperties: false`` unless the function takes ``**kwargs``.

:class:`PythonExecutor` runs the registered functions: coroutine functions on the
caller's loop, plain functions on the executor's own bounded thread pool (never
the loop's shared default pool), with a bounded queue. A thread cannot be
stopped: a call that timed out keeps its worker and its place in the gateway's
in-flight bounds until it really returns (see :class:`~toolscout.gateway.limits.Ticket`).
An exception in a tool reaches the caller as a generic "the tool failed"; its
text is the error's ``detail``, for the audit.
"""

from __future__ import annotations

import asyncio
import collections.abc as cabc
import contextvars
import enum
import functools
import inspect
import json
import re
import threading
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from toolscout.cards import Risk, ToolSpec, make_spec
from toolscout.errors import ArgumentError, CardError, ConfigError, ExecutorError
from toolscout.executors.base import EXECUTOR_BUSY, NOT_BOUND, TOOL_FAILED, clip
from toolscout.gateway.limits import CURRENT_TICKET

F = TypeVar("F", bound=Callable[..., Any])
SPEC_ATTR = "__toolscout_spec__"

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ARRAYS = {list, set, frozenset, cabc.Sequence, cabc.MutableSequence, cabc.Set, cabc.Iterable}
_OBJECTS = {dict, cabc.Mapping, cabc.MutableMapping}
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$")
_ARG_LINE = re.compile(r"^(\s*)\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


class _Unsupported(Exception):
    pass


def _json_type(values: Sequence[Any]) -> str | None:
    kinds = {_SCALARS.get(type(v)) or ("null" if v is None else "?") for v in values}
    return kinds.pop() if len(kinds) == 1 and "?" not in kinds else None


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str) and set(schema) <= {"type", "description", "items", "format"}:
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def type_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of one type hint; raises ``_Unsupported`` for anything else."""
    if tp is Any or tp is inspect.Parameter.empty or tp is object:
        return {}
    if tp is None or tp is type(None):
        return {"type": "null"}
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        out: dict[str, Any] = {"enum": values}
        kind = _json_type(values)
        return {"type": kind, **out} if kind else out
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        schema = type_schema(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**schema, "description": notes[0]} if notes else schema
    if origin is typing.Literal:
        kind = _json_type(args)
        return {"type": kind, "enum": list(args)} if kind else {"enum": list(args)}
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in args if a is not type(None)]
        inner = (
            type_schema(members[0])
            if len(members) == 1
            else {"anyOf": [type_schema(m) for m in members]}
        )
        return _nullable(inner) if len(members) < len(args) else inner
    if tp in _ARRAYS or origin in _ARRAYS:
        schema = {"type": "array"}
        if args:
            schema["items"] = type_schema(args[0])
        if tp in (set, frozenset) or origin in (set, frozenset, cabc.Set):
            schema["uniqueItems"] = True
        return schema
    if tp is tuple or origin is tuple:
        if not args:
            return {"type": "array"}
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": type_schema(args[0])}
        return {
            "type": "array",
            "prefixItems": [type_schema(a) for a in args],
            "items": False,
            "minItems": len(args),
        }
    if tp in _OBJECTS or origin in _OBJECTS:
        if args and args[0] is not str:
            raise _Unsupported("dict keys must be str")
        return (
            {"type": "object", "additionalProperties": type_schema(args[1])}
            if args
            else {"type": "object"}
        )
    raise _Unsupported(f"unsupported annotation {tp!r}")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(first line, {parameter: description}) from a Google or Sphinx docstring."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary = next((ln.strip() for ln in lines if ln.strip()), "")
    params: dict[str, str] = {}
    in_args, indent, current = False, -1, ""
    for line in lines:
        sphinx = _SPHINX.match(line)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            continue
        if _SECTION.match(line):
            in_args, indent, current = True, -1, ""
            continue
        if not in_args:
            continue
        if not line.strip():
            continue
        lead = len(line) - len(line.lstrip())
        m = _ARG_LINE.match(line)
        if m and (indent < 0 or lead == indent):
            indent, current = lead, m.group(2)
            params[current] = m.group(3).strip()
        elif current and lead > indent >= 0:
            params[current] = (params[current] + " " + line.strip()).strip()
        elif lead <= max(indent, 0) and line.strip().endswith(":"):
            in_args = False
    return summary, params


def _default(tool_id: str, name: str, value: Any) -> Any:
    value = value.value if isinstance(value, enum.Enum) else value
    if isinstance(value, tuple | frozenset | set):
        value = list(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise CardError(tool_id, f"parameters.{name}", "default is not JSON-serialisable") from None
    return value


def parameters_schema(fn: Callable[..., Any], tool_id: str, docs: dict[str, str]) -> dict[str, Any]:
    """The JSON Schema object of ``fn``'s keyword-callable parameters."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise CardError(tool_id, "parameters", f"cannot resolve type hints: {exc}") from None
    properties: dict[str, Any] = {}
    required: list[str] = []
    open_ended = False
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind is param.VAR_KEYWORD:
            open_ended = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.POSITIONAL_ONLY):
            if param.kind is param.POSITIONAL_ONLY and param.default is param.empty:
                raise CardError(
                    tool_id, f"parameters.{name}", "positional-only parameters cannot be passed"
                )
            continue
        try:
            schema = type_schema(hints.get(name, Any))
        except _Unsupported as exc:
            raise CardError(tool_id, f"parameters.{name}", str(exc)) from None
        if name in docs and "description" not in schema:
            schema = {**schema, "description": docs[name]}
        if param.default is param.empty:
            required.append(name)
        else:
            schema = {**schema, "default": _default(tool_id, name, param.default)}
        properties[name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = open_ended
    return out


def spec_from_function(
    fn: Callable[..., Any],
    *,
    id: str | None = None,
    name: str | None = None,
    summary: str | None = None,
    scopes: Sequence[str] = (),
    risk: Risk | str = Risk.READ,
    tenants: Sequence[str] = (),
    tags: Sequence[str] = (),
    aliases: Sequence[str] = (),
    not_for: Sequence[str] = (),
    group: str = "",
) -> ToolSpec:
    """Derive and validate a tool spec from a function (see the module docstring)."""
    if not callable(fn) or not hasattr(fn, "__name__"):
        raise CardError(str(id or fn), "(function)", "a tool must be a named function")
    tool_id = id or f"{fn.__module__}.{fn.__name__}"
    first_line, docs = parse_docstring(inspect.getdoc(fn))
    text = summary or first_line
    if not text:
        raise CardError(tool_id, "summary", "give the function a docstring or pass summary=")
    return make_spec(
        {
            "id": tool_id,
            "name": name or fn.__name__,
            "summary": text,
            "scopes": list(scopes),
            "tenants": list(tenants),
            "tags": list(tags),
            "aliases": list(aliases),
            "not_for": list(not_for),
            "group": group,
            "risk": risk.value if isinstance(risk, Risk) else risk,
            "source": "python",
            "parameters": parameters_schema(fn, tool_id, docs),
        }
    )


def tool(
    fn: F | None = None,
    *,
    id: str | None = None,
    name: str | None = None,
    summary: str | None = None,
    scopes: Sequence[str] = (),
    risk: Risk | str = Risk.READ,
    tenants: Sequence[str] = (),
    tags: Sequence[str] = (),
    aliases: Sequence[str] = (),
    not_for: Sequence[str] = (),
    group: str = "",
) -> Any:
    """Mark a function as a tool: its :class:`ToolSpec` is derived and attached.

    Use bare (``@tool``) or with card fields (``@tool(scopes=["billing:write"])``).
    The function itself is returned unchanged; register it with a
    :class:`PythonExecutor` to make it runnable.
    """

    def mark(f: F) -> F:
        spec = spec_from_function(
            f, id=id, name=name, summary=summary, scopes=scopes, risk=risk, tenants=tenants,
            tags=tags, aliases=aliases, not_for=not_for, group=group,
        )  # fmt: skip
        setattr(f, SPEC_ATTR, spec)
        return f

    return mark(fn) if fn is not None else mark


class PythonExecutor:
    """A registry of Python callables keyed by tool id, with its own bounded thread pool.

    ``workers`` threads run sync tools; at most ``max_queue`` more calls wait for
    one, beyond that a call is refused at once (``executor_busy``) instead of
    queueing behind work that may never finish.
    """

    def __init__(
        self,
        functions: Iterable[Callable[..., Any]] = (),
        *,
        workers: int = 32,
        max_queue: int = 64,
    ) -> None:
        if workers < 1 or max_queue < 0:
            raise ConfigError("workers must be at least 1 and max_queue at least 0")
        self.workers = workers
        self.max_queue = max_queue
        self._functions: dict[str, Callable[..., Any]] = {}
        self._specs: dict[str, ToolSpec] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._pending = 0
        self._lock = threading.Lock()
        for fn in functions:
            self.register(fn)

    def register(self, fn: Callable[..., Any], **card: Any) -> ToolSpec:
        """Add a function (marked with :func:`tool` or not); returns its spec."""
        spec = getattr(fn, SPEC_ATTR, None) if not card else None
        if not isinstance(spec, ToolSpec):
            spec = spec_from_function(fn, **card)
        if spec.id in self._functions and self._functions[spec.id] is not fn:
            raise ConfigError(f"tool id {spec.id!r} is already registered to another function")
        self._functions[spec.id] = fn
        self._specs[spec.id] = spec
        return spec

    def tool(self, fn: F | None = None, **card: Any) -> Any:
        """Decorator form of :meth:`register`."""

        def mark(f: F) -> F:
            setattr(f, SPEC_ATTR, self.register(f, **card))
            return f

        return mark(fn) if fn is not None else mark

    def specs(self) -> list[ToolSpec]:
        """The registered tools' specs, for adding to a catalog."""
        return list(self._specs.values())

    @property
    def pending(self) -> int:
        """Sync calls running or queued on the pool (timed-out ones still running included)."""
        with self._lock:
            return self._pending

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        fn = self._functions.get(spec.id)
        if fn is None:
            raise ExecutorError(
                f"no Python function is registered for {spec.id!r}",
                tool_id=spec.id,
                reason=NOT_BOUND,
            )
        try:
            if inspect.iscoroutinefunction(fn):
                return await fn(**arguments)
            return await self._in_thread(spec, functools.partial(fn, **arguments))
        except (ExecutorError, ArgumentError):
            raise
        except Exception as exc:
            raise ExecutorError(
                f"{spec.id}: the tool failed", tool_id=spec.id, reason=TOOL_FAILED, detail=clip(exc)
            ) from exc

    async def _in_thread(self, spec: ToolSpec, work: Callable[[], Any]) -> Any:
        with self._lock:
            if self._pending >= self.workers + self.max_queue:
                raise ExecutorError(
                    f"{spec.id}: too many calls are running; retry later",
                    tool_id=spec.id,
                    reason=EXECUTOR_BUSY,
                )
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="toolscout-tool")
            pool = self._pool
            self._pending += 1
        ticket = CURRENT_TICKET.get()
        let_go = ticket.hold() if ticket is not None else None

        def finished(_: object) -> None:
            with self._lock:
                self._pending -= 1
            if let_go is not None:
                let_go()

        try:
            future = pool.submit(contextvars.copy_context().run, work)
        except RuntimeError:  # the pool was shut down under us
            finished(None)
            raise
        future.add_done_callback(finished)
        return await asyncio.wrap_future(future)

    async def aclose(self) -> None:
        """Stop taking work; threads still running finish on their own."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
