"""Executors: how the gateway actually runs a tool once every check has passed.

:class:`Executor` is the seam. Three implementations ship:

* :class:`PythonExecutor` — a registry of Python callables; :func:`tool`
  derives each one's card and JSON Schema from its signature and docstring.
  Sync callables run in a worker thread, so a slow one blocks no other call.
* :class:`HTTPExecutor` — one :class:`HTTPEndpoint` (method, URL template,
  headers from configuration) per tool, over ``httpx``; redirects are followed
  only within the endpoint's own origin.
* :class:`~toolscout.executors.mcp.MCPExecutor` (in :mod:`toolscout.executors.mcp`) — an
  upstream MCP server over stdio or streamable HTTP through the ``mcp`` SDK.

Executors never check policy or validate arguments — the gateway has done both.
Failures surface as :class:`ExecutorError` (the gateway turns time-outs into
:class:`ExecutorTimeout`). Connections are held per event loop by a background
task, so they survive across calls and close cleanly with the loop.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from string import Formatter
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from toolscout.cards import Risk, ToolSpec
from toolscout.errors import ArgumentError, ConfigError, ExecutorError, ExecutorTimeout
from toolscout.executors.python import spec_from_function

if TYPE_CHECKING:
    import ssl

    import httpx

__all__ = [
    "Executor",
    "HTTPEndpoint",
    "HTTPExecutor",
    "PerLoop",
    "PythonExecutor",
    "tool",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
SPEC_ATTR = "__toolscout_spec__"

#: reason codes of :class:`ExecutorError`
NOT_BOUND = "executor_not_bound"
TOOL_FAILED = "tool_failed"
HTTP_STATUS = "http_status"
HTTP_ERROR = "http_error"
REDIRECT_REFUSED = "redirect_refused"
RESPONSE_TOO_LARGE = "response_too_large"
UPSTREAM_UNAVAILABLE = "upstream_unavailable"
BAD_URL_ARGUMENT = "invalid_url_argument"


@runtime_checkable
class Executor(Protocol):
    """Runs one already-authorised, already-validated tool call."""

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        """The tool's result (JSON-serialisable), or :class:`ExecutorError`."""
        ...

    async def aclose(self) -> None:
        """Release connections and processes; the executor may be used again after."""
        ...


# --------------------------------------------------------------------------- Python


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
    """A registry of Python callables keyed by tool id."""

    def __init__(self, functions: Iterable[Callable[..., Any]] = ()) -> None:
        self._functions: dict[str, Callable[..., Any]] = {}
        self._specs: dict[str, ToolSpec] = {}
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
            return await asyncio.to_thread(fn, **arguments)
        except (ExecutorError, ArgumentError):
            raise
        except Exception as exc:
            raise ExecutorError(
                f"{spec.id} failed: {type(exc).__name__}: {exc}",
                tool_id=spec.id,
                reason=TOOL_FAILED,
            ) from exc

    async def aclose(self) -> None:
        return None


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


# --------------------------------------------------------------------------- HTTP


@dataclass(frozen=True, slots=True)
class HTTPEndpoint:
    """How one tool maps to an HTTP call.

    ``url`` is a template whose ``{placeholders}`` (path or query only, never the
    host) are filled from the arguments, percent-encoded; the other arguments go
    in the query string (``body="query"``) or as a JSON body (``body="json"``);
    ``"auto"`` picks query for GET/HEAD/DELETE and JSON otherwise.
    """

    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str = "auto"
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        method = self.method.upper()
        object.__setattr__(self, "method", method)
        if method not in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"):
            raise ConfigError(f"unsupported HTTP method {self.method!r}")
        if self.body not in ("auto", "json", "query"):
            raise ConfigError(f"body must be auto, json or query, got {self.body!r}")
        scheme, sep, rest = self.url.partition("://")
        authority = rest.split("/", 1)[0].split("?", 1)[0]
        if scheme not in ("http", "https") or not sep or not authority:
            raise ConfigError(f"endpoint URL must be an absolute http(s) URL, got {self.url!r}")
        if "{" in authority or "}" in authority:
            raise ConfigError(f"the host of {self.url!r} must be fixed, not a template")

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(f for _, f, _, _ in Formatter().parse(self.url) if f)

    @property
    def origin(self) -> tuple[str, str]:
        scheme, _, rest = self.url.partition("://")
        return scheme, rest.split("/", 1)[0].split("?", 1)[0].lower()


def _url_part(tool_id: str, name: str, value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str | int | float):
        text = str(value)
    else:
        raise ArgumentError(
            f"URL parameter {name!r} must be a string or number",
            tool_id=tool_id,
            reason=BAD_URL_ARGUMENT,
        )
    if text in ("", ".", ".."):
        raise ArgumentError(
            f"URL parameter {name!r} must not be empty, '.' or '..'",
            tool_id=tool_id,
            reason=BAD_URL_ARGUMENT,
        )
    return urllib.parse.quote(text, safe="")


def _query_value(value: Any) -> Any:
    if isinstance(value, list):
        return [_query_value(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None or isinstance(value, dict):
        return json.dumps(value)
    return value


class HTTPExecutor:
    """Runs tools as HTTP calls; never follows a redirect to another origin."""

    def __init__(
        self,
        endpoints: Mapping[str, HTTPEndpoint],
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 10.0,
        max_redirects: int = 3,
        max_response_bytes: int = 1_000_000,
        verify: bool | ssl.SSLContext = True,
    ) -> None:
        self.endpoints = dict(endpoints)
        self.headers = dict(headers or {})
        self.timeout_s = timeout_s
        self.max_redirects = max_redirects
        self.max_response_bytes = max_response_bytes
        self._verify = verify
        self._clients: PerLoop[httpx.AsyncClient] = PerLoop(self._client)

    def _client(self) -> httpx.AsyncClient:
        import httpx

        return httpx.AsyncClient(
            headers={"user-agent": "toolscout", **self.headers},
            timeout=self.timeout_s,
            follow_redirects=False,
            verify=self._verify,
            trust_env=False,
        )

    def _request(self, client: httpx.AsyncClient, spec: ToolSpec, args: Mapping[str, Any]) -> Any:
        ep = self.endpoints.get(spec.id)
        if ep is None:
            raise ExecutorError(
                f"no HTTP endpoint for {spec.id!r}", tool_id=spec.id, reason=NOT_BOUND
            )
        names = ep.placeholders
        missing = [n for n in names if n not in args]
        if missing:
            raise ArgumentError(
                f"URL parameter {missing[0]!r} is required",
                tool_id=spec.id,
                reason=BAD_URL_ARGUMENT,
            )
        url = ep.url.format_map({n: _url_part(spec.id, n, args[n]) for n in names})
        rest = {k: v for k, v in args.items() if k not in names}
        as_query = ep.body == "query" or (
            ep.body == "auto" and ep.method in ("GET", "HEAD", "DELETE")
        )
        kwargs: dict[str, Any] = {"headers": dict(ep.headers)}
        if as_query:
            kwargs["params"] = {k: _query_value(v) for k, v in rest.items()}
        elif rest:
            kwargs["json"] = rest
        if ep.timeout_s is not None:
            kwargs["timeout"] = ep.timeout_s
        request = client.build_request(ep.method, url, **kwargs)
        if (request.url.scheme, request.url.netloc.decode().lower()) != ep.origin:
            raise ArgumentError(
                "arguments changed the endpoint's host", tool_id=spec.id, reason=BAD_URL_ARGUMENT
            )
        return request

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        import httpx

        try:
            client = await self._clients.get()
        except Exception as exc:
            raise ExecutorError(
                f"HTTP client failed: {exc}", tool_id=spec.id, reason=HTTP_ERROR
            ) from exc
        request = self._request(client, spec, arguments)
        origin = (request.url.scheme, request.url.netloc)
        try:
            for _ in range(self.max_redirects + 1):
                response = await client.send(request, stream=True)
                try:
                    if response.next_request is None:
                        return await self._result(spec, response)
                finally:
                    await response.aclose()
                request = response.next_request
                if (request.url.scheme, request.url.netloc) != origin:
                    raise ExecutorError(
                        f"refused a redirect to another host ({request.url.host})",
                        tool_id=spec.id,
                        reason=REDIRECT_REFUSED,
                    )
            raise ExecutorError("too many redirects", tool_id=spec.id, reason=REDIRECT_REFUSED)
        except httpx.TimeoutException as exc:
            raise ExecutorTimeout(
                f"HTTP timeout: {type(exc).__name__}", tool_id=spec.id, reason="executor_timeout"
            ) from exc
        except httpx.HTTPError as exc:
            raise ExecutorError(f"HTTP error: {exc}", tool_id=spec.id, reason=HTTP_ERROR) from exc

    async def _result(self, spec: ToolSpec, response: httpx.Response) -> Any:
        chunks, size = [], 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_response_bytes:
                raise ExecutorError(
                    f"response is over {self.max_response_bytes} bytes",
                    tool_id=spec.id,
                    reason=RESPONSE_TOO_LARGE,
                )
            chunks.append(chunk)
        body = b"".join(chunks).decode(response.encoding or "utf-8", "replace")
        if not response.is_success:
            raise ExecutorError(
                f"HTTP {response.status_code}: {body[:500]}", tool_id=spec.id, reason=HTTP_STATUS
            )
        if "json" in response.headers.get("content-type", "") and body:
            try:
                return json.loads(body)
            except ValueError:
                return body
        return body

    async def aclose(self) -> None:
        await self._clients.aclose()

    async def __aenter__(self) -> HTTPExecutor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class DryRunExecutor:
    """Runs nothing: answers with the call the gateway allowed, for rehearsing policy.

    What ``toolscout call --dry-run`` binds every tool to, so a catalog's
    entitlements, validation and audit can be exercised before real executors exist.
    """

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        return {"dry_run": True, "tool": spec.id, "arguments": dict(arguments)}

    async def aclose(self) -> None:
        return None
