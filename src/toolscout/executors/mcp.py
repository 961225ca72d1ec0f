"""Upstream MCP servers as executors, through the official ``mcp`` SDK (v2 ``Client``).

One :class:`MCPExecutor` fronts one upstream server, over stdio (a subprocess)
or streamable HTTP. Its connection is opened on first use and held per event
loop (see :class:`~toolscout.executors.base.PerLoop`), so calls share it and run
concurrently.

When the connection fails (the upstream process died, the socket closed), the
connection is dropped, the call is reported as ``upstream_unavailable``, and the
next call reconnects — but not before a back-off (``backoff_s``, doubling per
consecutive failure up to ``max_backoff_s``) has passed; calls inside the
back-off fail fast with ``upstream_unavailable``. A successful call resets it.

Results over ``max_result_bytes`` are refused (``response_too_large``). Upstream
error texts stay in the error's ``detail`` (the audit), never in the caller's
message. :meth:`MCPExecutor.list_specs` turns the upstream's tools into specs
for the catalog and refuses a tool whose schema references anything outside
itself. The ``mcp`` package is imported only when a connection is opened.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TextIO

from toolscout.cards import Risk, ToolSpec, make_spec
from toolscout.errors import CardError, ConfigError, ExecutorError
from toolscout.executors.base import (
    RESPONSE_TOO_LARGE,
    TOOL_FAILED,
    UPSTREAM_UNAVAILABLE,
    PerLoop,
    clip,
)
from toolscout.schemas import remote_refs

__all__ = ["MCPExecutor", "http_streams"]


class MCPExecutor:
    """Runs tools on one upstream MCP server, over stdio or streamable HTTP.

    ``server`` is a URL (streamable HTTP), an argv list (a stdio subprocess) or
    an ``mcp.StdioServerParameters``. A tool's upstream name is its id with
    ``prefix`` removed when the id starts with it, else its card name.
    """

    def __init__(
        self,
        server: str | Sequence[str] | Any,
        *,
        prefix: str = "",
        headers: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        errlog: TextIO | None = None,
        label: str = "",
        max_result_bytes: int = 1_000_000,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
    ) -> None:
        self.server = (
            server if isinstance(server, str) or not isinstance(server, Sequence) else list(server)
        )
        if isinstance(self.server, str) and not self.server.startswith(("http://", "https://")):
            raise ConfigError(f"an MCP server URL must be http(s), got {self.server!r}")
        if isinstance(self.server, list) and not self.server:
            raise ConfigError("an MCP stdio command must not be empty")
        self.prefix = prefix
        self.headers = dict(headers or {})
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.errlog = errlog
        self.label = label or (
            _public_url(self.server) if isinstance(self.server, str) else "stdio"
        )
        if max_result_bytes < 1 or backoff_s < 0 or max_backoff_s < backoff_s:
            raise ConfigError(
                "max_result_bytes must be positive and 0 <= backoff_s <= max_backoff_s"
            )
        self.max_result_bytes = max_result_bytes
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._failures = 0
        self._retry_at = 0.0
        self._state_lock = threading.Lock()
        self._clients: PerLoop[Any] = PerLoop(self._client)

    def _transport(self) -> Any:
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        if isinstance(self.server, str):
            return http_streams(self.server, self.headers)
        params = self.server
        if isinstance(params, list):
            params = StdioServerParameters(
                command=params[0], args=params[1:], env=self.env, cwd=self.cwd
            )
        return stdio_client(params, errlog=self.errlog or sys.stderr)

    def _client(self) -> Any:
        from mcp import Client, Implementation

        return Client(
            self._transport(), client_info=Implementation(name="toolscout", version="0.1.0")
        )

    def upstream_name(self, spec: ToolSpec) -> str:
        if self.prefix and spec.id.startswith(self.prefix):
            return spec.id[len(self.prefix) :]
        return spec.card.name

    def _unavailable(self, tool_id: str, detail: str = "") -> ExecutorError:
        return ExecutorError(
            f"{tool_id}: the upstream MCP server is unavailable; retry later",
            tool_id=tool_id,
            reason=UPSTREAM_UNAVAILABLE,
            detail=detail,
        )

    def _failed(self) -> None:
        """Count a connection-level failure: the next attempt waits out the back-off."""
        with self._state_lock:
            self._failures += 1
            delay = min(self.max_backoff_s, self.backoff_s * 2 ** (self._failures - 1))
            self._retry_at = time.monotonic() + delay

    def _succeeded(self) -> None:
        with self._state_lock:
            self._failures = 0
            self._retry_at = 0.0

    @property
    def backing_off(self) -> float:
        """Seconds until the next reconnection attempt (0 when calls go through)."""
        with self._state_lock:
            return max(0.0, self._retry_at - time.monotonic())

    async def _session(self, tool_id: str) -> Any:
        wait = self.backing_off
        if wait > 0:
            raise self._unavailable(tool_id, f"{self.label}: backing off for {wait:.2f}s")
        try:
            return await self._clients.get()
        except Exception as exc:
            self._failed()
            raise self._unavailable(tool_id, clip(f"{self.label}: {clip(exc)}")) from exc

    async def _lost(self, tool_id: str, exc: BaseException) -> ExecutorError:
        """The connection broke: drop it, start the back-off, report unavailable."""
        self._failed()
        await self._clients.reset()
        return self._unavailable(tool_id, clip(f"{self.label}: {clip(exc)}"))

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        client = await self._session(spec.id)
        try:
            result = await client.call_tool(self.upstream_name(spec), dict(arguments))
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise await self._lost(spec.id, exc) from exc
            raise ExecutorError(
                f"{spec.id}: the upstream tool refused the call",
                tool_id=spec.id,
                reason=TOOL_FAILED,
                detail=clip(exc.message),
            ) from exc
        except Exception as exc:
            raise await self._lost(spec.id, exc) from exc
        self._succeeded()
        texts = [b.text for b in result.content if getattr(b, "type", "") == "text"]
        if result.is_error:
            raise ExecutorError(
                f"{spec.id}: the tool failed",
                tool_id=spec.id,
                reason=TOOL_FAILED,
                detail=clip(" ".join(texts)),
            )
        if result.structured_content is not None:
            value: Any = result.structured_content
        elif len(texts) == len(result.content):
            value = "\n".join(texts)
        else:
            value = [
                b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content
            ]
        size = len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "replace"))
        if size > self.max_result_bytes:
            raise ExecutorError(
                f"{spec.id}: the result is over {self.max_result_bytes} bytes",
                tool_id=spec.id,
                reason=RESPONSE_TOO_LARGE,
            )
        return value

    async def list_specs(
        self,
        *,
        scopes: Sequence[str] = (),
        tenants: Sequence[str] = (),
        group: str = "",
        risk: Risk | None = None,
    ) -> list[ToolSpec]:
        """The upstream's tools as specs (id = prefix + name). Without ``risk``, a tool
        is ``read`` only if it says it is read-only, ``write`` if it says it is not
        destructive, else ``destructive`` (the MCP default)."""
        client = await self._session(self.prefix or self.label)
        specs, cursor = [], None
        for _ in range(100):
            page = await client.list_tools(cursor=cursor)
            for t in page.tools:
                remote = remote_refs(t.input_schema)
                if remote:
                    raise CardError(
                        self.prefix + t.name,
                        "parameters",
                        f"the schema references {remote[0]!r} outside itself; it is never fetched",
                    )
                hints = t.annotations
                level = risk or (
                    Risk.READ if hints and hints.read_only_hint
                    else Risk.WRITE if hints and hints.destructive_hint is False
                    else Risk.DESTRUCTIVE
                )  # fmt: skip
                specs.append(
                    make_spec(
                        {
                            "id": self.prefix + t.name,
                            "name": t.name,
                            "summary": (t.description or t.title or t.name).strip().split("\n")[0],
                            "scopes": list(scopes),
                            "tenants": list(tenants),
                            "group": group,
                            "risk": level.value,
                            "source": f"mcp:{self.label}",
                            "parameters": t.input_schema,
                        }
                    )
                )
            cursor = page.next_cursor
            if cursor is None:
                break
        return specs

    async def aclose(self) -> None:
        await self._clients.aclose()

    async def __aenter__(self) -> MCPExecutor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _public_url(url: str) -> str:
    """The URL without credentials or query, for messages and card sources."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"


@asynccontextmanager
async def http_streams(url: str, headers: Mapping[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with configured headers, on an HTTP client this context owns (this
    executor's and the MCP gateway's upstream connections both open theirs here)."""
    from mcp.client.streamable_http import streamable_http_client

    if not headers:
        async with streamable_http_client(url) as streams:
            yield streams
        return
    import httpx2  # the mcp SDK's HTTP client

    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=dict(headers), timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams
