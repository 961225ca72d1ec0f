"""An upstream's stdio, and the gateway's own lean ``tools/call`` over it.

The SDK's ``stdio_client`` hands every line both ways through memory streams and two
tasks (a stdin writer, a stdout reader), and its ``Client.call_tool`` goes through the
request model, the session's dispatcher (a pending entry with its own memory stream, an
OpenTelemetry span, a cancel scope) and back: on a 2-core machine the biggest part of
what the gateway spends on a forwarded call.

:class:`LeanStdio` is the same transport (spawned, stopped and read as ``stdio_client``
does, with the SDK's own helpers) whose stdout reader also answers the gateway's own
requests: :meth:`LeanStdio.call_tool` writes the ``tools/call`` line to the upstream's
stdin itself (an id of its own, ``toolscout-N``, that the SDK never uses) and the reader
hands the answer line with that id straight back, untouched by the SDK's streams. Every
other line (the SDK's own requests' answers, the upstream's requests and notifications)
goes to the SDK as before. What ``Client.call_tool`` does that matters is kept:

* the request is stamped by the session (``_stamp``: on a 2026-07-28 connection the
  envelope in ``_meta``), and carries a progress token when the call has a progress
  callback; the upstream's ``notifications/progress`` on that token reach the callback
  (which moves the call's deadline) and are still handed to the SDK, as its dispatcher
  tees them;
* the result is checked as the session checks it: the negative ``ttlMs`` clamp, the
  method's result validation for the negotiated version, a later revision's fields
  dropped, the session's result adapter (a malformed answer raises pydantic's
  ``ValidationError``: the caller's ``ExecutorError``, ``tool_failed``), then the
  tool's output schema (the session's compiled validator, cached per tool and
  listing);
* a JSON-RPC error answer is an ``MCPError`` with its code, message and data; a
  ``HEADER_MISMATCH`` on a 2026-07-28 connection re-lists the tool and resends once
  through the SDK, as ``Client.call_tool`` does;
* an ``InputRequiredResult`` is finished by the SDK's own input-required driver (the
  upstream's questions to the gateway's callbacks, the retries through the session);
* a cancelled call (the caller's cancellation, the deadline) tells the upstream with
  ``notifications/cancelled``, as the dispatcher's courtesy cancel does; the end of the
  upstream's stdout fails the calls in flight with ``CONNECTION_CLOSED``.

A session with result claims (client extensions) is left to ``Client.call_tool``.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from toolscout.mcp import leantap
from toolscout.mcp.leantap import Tap
from toolscout.mcp.sdk import sdk_names
from toolscout.mcp.timeline import mark

__all__ = ["ENV", "LEAN_MARK", "PREFIX", "LeanStdio", "lean_enabled"]

log = logging.getLogger(__name__)

#: the timeline's note of the first call answered through this transport's own path
LEAN_MARK = "first upstream tools/call answered by the gateway's own client"
#: the ids of the gateway's own requests (the SDK numbers its own from 0)
PREFIX = "toolscout-"
#: set to ``off`` (or ``0``), upstream calls go through the SDK's ``Client.call_tool``
ENV = "TOOLSCOUT_LEANCALL"
_OFF = frozenset({"0", "off", "no", "false"})
_Progress = Callable[[float, float | None, str | None], Awaitable[None]]


#: the upstream request line's JSON (``json.dumps`` with these options builds one per call)
_LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def lean_enabled() -> bool:
    """Whether an upstream's stdio is a :class:`LeanStdio` (unless :data:`ENV` or the fast
    path's own switch, ``TOOLSCOUT_FASTCALL``, says ``off``: all through the SDK)."""
    return (
        not {
            os.environ.get(ENV, "").lower(),
            os.environ.get("TOOLSCOUT_FASTCALL", "").lower(),
        }
        & _OFF
    )


class LeanStdio:
    """An upstream's stdio transport whose reader also answers :meth:`call_tool`."""

    def __init__(self, params: Any, errlog: TextIO) -> None:
        self.params = params
        self.errlog = errlog
        self._stdin: Any = None
        self._n = 0
        #: id → (the answer's future, the call's progress callback)
        self._pending: dict[str, tuple[asyncio.Future[dict[str, Any]], _Progress | None]] = {}
        #: calls answered through this transport's own path (a count, for tests and profiles)
        self.answered = 0
        #: stdout bytes the tap passed on to the reader task, and bytes it finished with
        #: (equal: nothing written earlier is still on its way; see ``mcp/leantap.py``)
        self.fed = 0
        self.consumed = 0
        self.tap: Tap | None = None

    @property
    def open(self) -> bool:
        return self._stdin is not None

    @asynccontextmanager
    async def streams(self) -> AsyncIterator[Any]:
        """The SDK's transport streams (what ``stdio_client`` yields), over a process
        spawned and stopped as ``stdio_client`` does it."""
        import anyio
        import anyio.lowlevel
        from mcp.client import stdio as sdk

        server = self.params
        command = await sdk._get_executable_command(server.command)
        process = await sdk._create_platform_compatible_process(
            command=command,
            args=server.args,
            env=sdk.get_default_environment() | (server.env or {}),
            errlog=self.errlog,
            cwd=server.cwd,
        )
        encoding, errors = server.encoding, server.encoding_error_handler
        self.tap = leantap.install(process, self, encoding, errors)
        read_stream_writer, read_stream = anyio.create_memory_object_stream[Any](0)
        write_stream, write_stream_reader = anyio.create_memory_object_stream[Any](0)
        shutting_down = False
        writer_done = anyio.Event()

        async def stdout_reader() -> None:
            assert process.stdout, "Opened process is missing stdout"
            stdout = process.stdout
            decoder = codecs.getincrementaldecoder(encoding)(errors=errors)
            try:
                async with read_stream_writer:
                    try:
                        buffer = ""
                        while True:
                            try:
                                raw = await stdout.receive()
                            except anyio.EndOfStream:
                                break
                            lines = (buffer + decoder.decode(raw)).split("\n")
                            buffer = lines.pop()
                            for line in lines:
                                if self._route(line):
                                    continue
                                try:
                                    await read_stream_writer.send(sdk._parse_line(line))
                                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                    return
                            self.consumed += len(raw)
                    finally:
                        self._closed()
                        await sdk._drain_stdout(process)
            except anyio.ClosedResourceError:
                pass
            except (anyio.BrokenResourceError, ConnectionError):
                if not shutting_down:
                    log.exception("Reading from the MCP server's stdout failed mid-session")

        async def stdin_writer() -> None:
            assert process.stdin, "Opened process is missing stdin"
            try:
                async with write_stream_reader:
                    async for session_message in write_stream_reader:
                        text = session_message.message.model_dump_json(
                            by_alias=True, exclude_unset=True
                        )
                        await process.stdin.send((text + "\n").encode(encoding, errors))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                await read_stream_writer.aclose()
            finally:
                self._stdin = None
                writer_done.set()

        async def shutdown() -> None:
            self._stdin = None
            read_stream.close()
            write_stream.close()
            with anyio.move_on_after(sdk._WRITER_FLUSH_TIMEOUT) as flush_scope:
                await writer_done.wait()
            if flush_scope.cancelled_caught:
                await anyio.lowlevel.cancel_shielded_checkpoint()
            await sdk._stop_server_process(process)
            await sdk._aclose_all(
                read_stream, write_stream, read_stream_writer, write_stream_reader
            )
            await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(stdout_reader)
            tg.start_soon(stdin_writer)
            self._stdin = process.stdin
            try:
                yield read_stream, write_stream
            finally:
                shutting_down = True
                self._closed()
                with anyio.CancelScope(shield=True):
                    await shutdown()
                tg.cancel_scope.cancel()
        await anyio.lowlevel.cancel_shielded_checkpoint()

    # -- the reader's side -------------------------------------------------------------
    def _route(self, line: str) -> bool:
        """Whether ``line`` answered one of this transport's own requests (taken here). A
        progress report on one of their tokens reaches its callback and is still the
        SDK's (as its dispatcher tees it)."""
        message = self._own(line)
        if message is None:
            return False
        if "method" in message:
            self._progress(message)
            return False
        return self._resolve(message)

    def take_answer(self, line: str) -> bool:
        """Whether ``line`` answered one of this transport's own requests, taken now (the
        tap's question, :mod:`toolscout.mcp.leantap`); anything else is left alone."""
        message = self._own(line)
        return message is not None and "method" not in message and self._resolve(message)

    def _own(self, line: str) -> dict[str, Any] | None:
        """``line`` parsed, when it may concern this transport's own requests."""
        if not self._pending or PREFIX not in line:
            return None
        try:
            message = json.loads(line)
        except ValueError:
            return None  # the SDK reports it
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return None
        return message

    def _resolve(self, message: dict[str, Any]) -> bool:
        """An answer message to one of the own requests handed to its caller (taken)."""
        rid = message.get("id")
        entry = self._pending.get(rid) if isinstance(rid, str) else None
        if entry is None or not _answer_shape(message):
            return False  # not ours, or not an answer the SDK would take: the SDK's way
        if not entry[0].done():
            entry[0].set_result(message)
        return True

    def _progress(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        if message.get("method") != "notifications/progress" or not isinstance(params, dict):
            return
        token, progress = params.get("progressToken"), params.get("progress")
        entry = self._pending.get(token) if isinstance(token, str) else None
        if entry is None or entry[1] is None:
            return
        if isinstance(progress, bool) or not isinstance(progress, int | float):
            return
        total, text = params.get("total"), params.get("message")
        on_progress = entry[1]

        async def report() -> None:
            try:
                await on_progress(
                    float(progress),
                    float(total) if isinstance(total, int | float) else None,
                    text if isinstance(text, str) else None,
                )
            except Exception:  # a callback's fault never breaks the reader
                log.exception("progress callback failed")

        asyncio.get_running_loop().create_task(report())

    def _closed(self) -> None:
        """The upstream's stdout ended: the calls in flight fail as the dispatcher's do."""
        self._stdin = None
        if not self._pending:
            return
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        for future, _ in list(self._pending.values()):
            if not future.done():
                future.set_exception(MCPError(code=CONNECTION_CLOSED, message="Connection closed"))

    # -- the gateway's own request ---------------------------------------------------------
    async def call_tool(
        self, client: Any, name: str, arguments: dict[str, Any], progress: _Progress | None
    ) -> Any:
        """``client.call_tool(name, arguments, progress_callback=progress)``'s result (a
        ``CallToolResult``), the request written and its answer read here."""
        sdk = sdk_names()
        session = client.session
        if self._stdin is None or session._active_claims:
            return await client.call_tool(name, arguments, progress_callback=progress)
        data: dict[str, Any] = {
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        session._stamp(data, {})
        answer = await self._request(data["params"], progress)
        if "error" in answer:
            error = sdk.ErrorData.model_validate(answer["error"])
            modern = client.protocol_version in sdk.MODERN
            if error.code == sdk.HEADER_MISMATCH and modern:
                # the SDK's recovery: the tool's listing is stale; re-list, resend once
                await client._relist_tool(name)
                return await self._finish(client, name, arguments, progress, None)
            raise sdk.MCPError(code=error.code, message=error.message, data=error.data)
        raw: dict[str, Any] = answer["result"]
        sdk.session._clamp_inbound_ttl(raw)
        version = session._negotiated_version or "2025-11-25"
        with contextlib.suppress(KeyError):  # the SDK's ``validate_server_result``, whose
            # dump of the validated result (discarded) cannot fail for parsed JSON
            sdk.methods._check_known_version(version)
            sdk.methods._adapter(
                sdk.methods.SERVER_RESULTS[("tools/call", version)]
            ).validate_python(raw, by_name=False)
        foreign = sdk.session._later_revision_fields("tools/call", version)
        if not foreign.isdisjoint(raw):
            raw = {key: value for key, value in raw.items() if key not in foreign}
        result = session._call_tool_adapter.validate_python(raw, by_name=False)
        self.answered += 1
        if self.answered == 1:
            mark(LEAN_MARK, once=True)
        if isinstance(result, sdk.CallToolResult):
            if not result.is_error and not _fits_output_schema(session, name, result):
                await session.validate_tool_result(name, result)  # the SDK's check, its error
            return result
        if isinstance(result, sdk.InputRequiredResult):
            return await self._finish(client, name, arguments, progress, result)
        raise RuntimeError(f"tools/call {name!r}: an unexpected result shape")  # pragma: no cover

    async def _finish(
        self,
        client: Any,
        name: str,
        arguments: dict[str, Any],
        progress: _Progress | None,
        first: Any,
    ) -> Any:
        """The rest of the call on the SDK's path: its input-required rounds (``first``: the
        upstream's questions), or a resend (``None``)."""

        async def send(responses: Any, state: str | None) -> Any:
            return await client.session.call_tool(
                name,
                arguments,
                progress_callback=progress,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )

        if first is None:
            first = await send(None, None)
        return await client._drive_input_required(first, send)

    async def _request(self, params: dict[str, Any], progress: _Progress | None) -> dict[str, Any]:
        """The answer message (``result`` or ``error``) to one ``tools/call`` line."""
        sdk = sdk_names()
        self._n += 1
        rid = f"{PREFIX}{self._n}"
        if progress is not None:  # as the dispatcher does: the request's id is the token
            params["_meta"] = {**(params.get("_meta") or {}), "progressToken": rid}
        line = _LINE({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
        server = self.params
        data = (line + "\n").encode(server.encoding, server.encoding_error_handler)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = (future, progress)
        written = False
        try:
            stdin = self._stdin
            if stdin is None:
                raise sdk.MCPError(code=sdk.CONNECTION_CLOSED, message="Connection closed")
            try:
                written = True
                await _send_line(stdin, data)
            except sdk.pipe_errors:
                raise sdk.MCPError(
                    code=sdk.CONNECTION_CLOSED, message="Connection closed"
                ) from None
            return await future
        except asyncio.CancelledError:
            if written and (future.cancelled() or not future.done()):  # never answered
                await self._cancel(rid)
            raise
        finally:
            self._pending.pop(rid, None)

    async def _cancel(self, rid: str) -> None:
        """The dispatcher's courtesy cancel for a request abandoned by its caller."""
        stdin = self._stdin
        if stdin is None:
            return
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": rid, "reason": "caller cancelled"},
        }
        server = self.params
        data = (json.dumps(note, separators=(",", ":")) + "\n").encode(
            server.encoding, server.encoding_error_handler
        )
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                await asyncio.shield(stdin.send(data))


async def _send_line(stdin: Any, data: bytes) -> None:
    """``data`` onto the upstream's stdin. When it is anyio's wrapper of an asyncio pipe
    writer (the SDK's spawn), the line goes straight to the pipe's transport and the call
    waits only while the pipe is backed up: anyio's ``send`` around the same write adds a
    cancel-scope check, a shielded cancel scope and a turn of the event loop per line.
    A closed pipe raises ``BrokenPipeError`` (the transport would drop the line silently);
    anything else is sent anyio's way."""
    writer = getattr(stdin, "_stream", None)
    if not isinstance(writer, asyncio.StreamWriter):
        await stdin.send(data)
        return
    if writer.is_closing():
        raise BrokenPipeError("the upstream's stdin is closed")
    writer.write(data)
    if writer.transport.get_write_buffer_size():
        await writer.drain()  # raises ConnectionResetError if the pipe broke meanwhile


def _fits_output_schema(session: Any, name: str, result: Any) -> bool:
    """Whether ``result``'s structured content is known to fit the tool's listed output
    schema, by the session's own compiled validator (cached per tool, evicted when a
    listing changes the schema); ``is_valid`` builds no error objects. ``False`` (no
    schema listed, no structured content, a failure, a schema fault) leaves the verdict
    and its message to ``validate_tool_result``."""
    schema = session._tool_output_schemas.get(name)
    if schema is None or result.structured_content is None:
        return False
    try:
        entry = _quick(schema)
        if not entry.compiled:  # the SDK's validator compiles it (an invalid schema: its error)
            session._output_schema_validator(name, schema)
            entry.compiled = True
        quick = entry.check
        if quick is not None and quick(result.structured_content):
            return True  # certainly valid (any doubt: the SDK's validator decides)
        validator = session._output_schema_validator(name, schema)
        return bool(validator.is_valid(result.structured_content))
    except Exception:  # an invalid schema, an unresolvable $ref: the SDK's error
        return False


@dataclass(slots=True)
class _Quick:
    """An output schema (kept: its id is not reused meanwhile), its quick check
    (``toolscout.gateway.quickcheck``) and whether the SDK's validator compiled it: a
    schema that compiled once compiles again (the SDK compiles it per session and tool,
    and refuses one that does not on every call)."""

    schema: Any
    check: Any
    compiled: bool = False


#: output schema → its :class:`_Quick`, by identity: the session replaces a tool's schema
#: object when a listing changes it
_QUICK: dict[int, _Quick] = {}


def _quick(schema: Any) -> _Quick:
    from toolscout.gateway.quickcheck import compile_quick

    hit = _QUICK.get(id(schema))
    if hit is not None and hit.schema is schema:
        return hit
    if len(_QUICK) >= 1024:
        _QUICK.clear()
    entry = _QUICK[id(schema)] = _Quick(schema, compile_quick(schema))
    return entry


def _answer_shape(message: dict[str, Any]) -> bool:
    """A JSON-RPC answer the SDK's message parse would take: a ``result`` object, or an
    ``error`` with an integer code and a string message; not both."""
    if ("result" in message) == ("error" in message):
        return False
    if "result" in message:
        return isinstance(message["result"], dict)
    error = message["error"]
    return (
        isinstance(error, dict)
        and isinstance(error.get("code"), int)
        and not isinstance(error.get("code"), bool)
        and isinstance(error.get("message"), str)
    )
