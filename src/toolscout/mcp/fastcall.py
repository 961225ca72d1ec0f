"""Plain ``tools/call`` requests answered below the SDK's dispatcher (stdio on pipes).

Over stdio every request normally crosses the SDK's whole server side before the
gateway's handler sees it: the line is validated into a message model, relayed through
the era-replay stream and the dispatcher's per-request task and cancel scope, wrapped
in a request context, passed through the middleware chain (OpenTelemetry's span among
them), and its result goes back the same way — on a 2-core machine several
milliseconds per call, more than the upstream call itself.

:class:`FastCalls` sits between the caller's stdin (:class:`~toolscout.mcp.pipes.PipeLines`)
and the SDK's ``stdio_server``. It answers itself, as its own asyncio task, the one
request that dominates a session — a *plain* ``tools/call`` on a 2026-07-28
connection — and hands every other line to the SDK unchanged. The pipe offers it each
line as the bytes arrive while the SDK waits for one (``PipeLines.hook``), so a call's task
starts in the pipe's own callback, not a turn of the event loop later. A plain call:

* comes after the SDK saw the connection's first request and that request opened a
  2026-07-28 connection (every request carries its envelope; there is no session
  state for the SDK to keep; a handshake-era connection stays wholly on the SDK path:
  there, an upstream's question mid-call is a request to the client, which needs the
  SDK's dispatcher);
* is a JSON-RPC request with a string or integer id, ``params`` holding only ``name``,
  ``arguments`` and ``_meta``: no ``task``, no ``requestState`` / ``inputResponses``
  (a retry carrying answers resumes its round on the SDK path, from the same
  :class:`~toolscout.mcp.rounds.Rounds`), no ``progressToken``;
* names no meta-tool (``search_tools`` and ``call_tool`` stay on the SDK path);
* passes the SDK's own checks, run here first: the envelope
  (``classify_inbound_request``), the method's surface validation and the typed
  params; any doubt and the line goes to the SDK, which answers it as before.

The call then runs **the gateway's own handler** (:meth:`ToolHandlers._call_tool`, the
one the SDK calls: the verified principal, the policy re-check, argument validation,
the audit attempt committed before the tool runs and its outcome, the discovery link,
an upstream's questions as an input-required round), with a request context and
session built as the SDK's runner builds them, and its result is shaped for the wire by
the runner's own serializer and written with the caller's id: the same bytes the SDK
path writes (``tests/test_mcp_fastcall.py`` compares them).

A call's own notifications (an upstream's log lines its ``_meta`` opted into) are written
by its task before its answer; answers to different ids are not ordered (nor are they by
the SDK, which runs each request as its own task).

``notifications/cancelled`` naming a call in flight here cancels it (the audit records
``cancelled``, the upstream is told) and is not passed to the SDK, which never knew
that id; a cancelled call is never answered. At the end of stdin the calls in flight
get :data:`FINISH_S` to finish, then are cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from toolscout.gateway.afterreply import AFTER_REPLY, AfterReply
from toolscout.mcp.meta import META_TOOLS
from toolscout.mcp.pipes import PipeLines, PipeOut
from toolscout.mcp.sdk import sdk_names
from toolscout.mcp.timeline import mark

if TYPE_CHECKING:
    from toolscout.mcp.tools import ToolHandlers

__all__ = ["ENV", "FINISH_S", "FastCalls", "over"]

log = logging.getLogger(__name__)

#: set to ``off`` (or ``0``), every request goes through the SDK (a comparison, a fallback)
ENV = "TOOLSCOUT_FASTCALL"
_OFF = frozenset({"0", "off", "no", "false"})
#: seconds the calls in flight get to finish once stdin ends
FINISH_S = 5.0
_MESSAGE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PLAIN_PARAMS = frozenset({"name", "arguments", "_meta"})


class _Stamp:
    """What the SDK's result serializer asks of the server (``ServerRunner._serialize``:
    its cache hints and its ``serverInfo`` stamp), with the stamp not copied per call: the
    SDK's ``server_info_stamp`` deep-copies it so a caller that keeps and edits a stamped
    result cannot change later ones; here the result is encoded at once and dropped."""

    def __init__(self, server: Any) -> None:
        self.cache_hints = server.cache_hints
        self.server_info_stamp = server._server_info_stamp_source  # never written to


def response_line(rid: Any, result: dict[str, Any]) -> str:
    """The JSON-RPC answer line of ``result`` for request ``rid``: the bytes of the SDK's
    ``JSONRPCResponse(...).model_dump_json(by_alias=True, exclude_unset=True)`` (the same
    pydantic serializer, without building and validating the model)."""
    line: bytes = sdk_names().to_json(
        {"jsonrpc": "2.0", "id": rid, "result": result}, inf_nan_mode="null"
    )
    return line.decode("utf-8")


def over(gateway: ToolHandlers, lines: PipeLines | None, out: PipeOut | None) -> Any:
    """The stdin lines for the SDK's ``stdio_server``: through :class:`FastCalls` when both
    ends are on the event loop and :data:`ENV` does not turn it off (``lines`` as it was
    otherwise, ``None`` included)."""
    if lines is None or out is None or os.environ.get(ENV, "").lower() in _OFF:
        return lines
    return FastCalls(gateway, lines, out)


class _RequestChannel:
    """The request-scoped outbound of a call answered here (what the SDK's dispatch
    context is to a handler): notifications written to the caller's stdout, no requests
    (2026-07-28 forbids a server's request), no progress (no token was asked for)."""

    can_send_request = False

    def __init__(self, calls: FastCalls) -> None:
        self._calls = calls

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        from mcp.types import JSONRPCNotification

        note = JSONRPCNotification(
            jsonrpc="2.0", method=method, params=dict(params) if params is not None else None
        )
        await self._calls.send(note.model_dump_json(by_alias=True, exclude_unset=True))

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        from mcp.shared.exceptions import NoBackChannelError

        raise NoBackChannelError(method)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None


class FastCalls:
    """The caller's stdin lines for the SDK, less the plain ``tools/call`` requests (and
    their cancellations), which are answered here."""

    def __init__(self, gateway: ToolHandlers, lines: PipeLines, out: PipeOut) -> None:
        self._gateway = gateway
        self._lines = lines
        self._out = out
        #: the connection's era, once the SDK was handed its first request
        self._era: str | None = None
        self._inflight: dict[Any, asyncio.Task[None]] = {}
        self._channel = _RequestChannel(self)
        self._serializer: Any = None
        #: (envelope, connection) of the last call, when it may serve the next
        self._kept: tuple[tuple[str, Any, Any], Any] | None = None
        #: calls answered here, and calls cancelled here (counts, for a debugger or a profile)
        self.answered = 0
        self.cancelled = 0
        lines.hook = self._offer  # offered each line as it arrives (in order: mcp/pipes.py)

    def __aiter__(self) -> FastCalls:
        return self

    async def __anext__(self) -> str:
        """The next line that was not taken here (each line is offered to :meth:`_offer`
        once, by the pipe, in order: as it arrives while the SDK waits for a line)."""
        try:
            return await self._lines.__anext__()
        except StopAsyncIteration:
            await self._finish()
            raise

    def _offer(self, line: str) -> bool:
        try:
            return self._take(line)
        except Exception:  # a fault here must not end the session: the SDK's way
            log.exception("fast path: a line was handed to the SDK after a fault")
            return False

    # -- which lines are taken ------------------------------------------------------
    def _take(self, line: str) -> bool:
        """Whether this line was taken here (answered, or a cancellation of one that is)."""
        if self._era is None:
            self._era = _era_of(line)
            return False
        if self._era != "modern":
            return False
        if '"tools/call"' in line:
            return self._call(line)
        if '"notifications/cancelled"' in line and self._inflight:
            return self._cancel(line)
        return False

    def _call(self, line: str) -> bool:
        plain = _plain_call(line)
        if plain is None:
            return False
        rid, params, typed, route = plain
        key = sdk_names().coerce_request_id(rid)
        if key in self._inflight:  # a duplicate id: the SDK's way
            return False
        loop = asyncio.get_running_loop()
        self._inflight[key] = loop.create_task(self._answer(key, rid, params, typed, route))
        return True  # the task drops its own entry as it ends (no done callback: a turn fewer)

    def _cancel(self, line: str) -> bool:
        sdk = sdk_names()
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
            return False
        params = message.get("params")
        rid = sdk.as_request_id(params.get("requestId")) if isinstance(params, dict) else None
        key = sdk.coerce_request_id(rid) if rid is not None else None
        task = self._inflight.get(key) if key is not None else None
        if task is None:
            return False  # not ours: the SDK's
        self.cancelled += 1
        task.cancel()
        # a task cancelled before its first step never runs its body (nor the body's
        # ``finally``, which drops its entry): its entry goes when it is done
        task.add_done_callback(lambda finished: self._forget(key, finished))
        return True

    def _forget(self, key: Any, task: asyncio.Task[None] | None) -> None:
        """``key``'s entry dropped, when it is still ``task``'s (not a later call's)."""
        if task is not None and self._inflight.get(key) is task:
            del self._inflight[key]

    # -- answering ------------------------------------------------------------------
    async def _answer(
        self, key: Any, rid: Any, params: dict[str, Any], typed: Any, route: Any
    ) -> None:
        after = AfterReply()  # the call's audit outcome: written once its answer went
        AFTER_REPLY.set(after)  # this task's own context (and the call's round task's)
        try:
            try:
                line = await self._result(rid, params, typed, route)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # what the SDK's modern loop answers for it
                sdk = sdk_names()
                error = sdk.modern_error_data(exc)
                line = sdk.JSONRPCError(jsonrpc="2.0", id=rid, error=error).model_dump_json(
                    by_alias=True, exclude_unset=True
                )
            finally:
                called = getattr(self._gateway, "_called_once", None)
                if called is not None:
                    called.set()  # what the gateway's first-call middleware notes
            await self.send(line, after.run)
            self.answered += 1
            if self.answered == 1:
                mark("first tools/call answered below the SDK", once=True)
        except asyncio.CancelledError:
            return  # a cancelled request is never answered
        finally:
            after.run()  # cancelled, or the send failed: the outcome now
            # the entry goes as the task ends (nothing runs between this and its end)
            self._forget(key, asyncio.current_task())

    async def _result(self, rid: Any, params: dict[str, Any], typed: Any, route: Any) -> str:
        """The answer line: the gateway's handler run with the context and session the
        SDK's runner would build, its result shaped by the runner's own serializer."""
        sdk = sdk_names()
        version = route.protocol_version
        envelope = (version, route.client_info, route.client_capabilities)
        connection = self._connection(envelope)
        request_meta = typed.meta  # what ``_extract_meta(params)`` validates again
        session = sdk.ServerSession(self._channel, connection, request_meta=request_meta)
        ctx = sdk.ServerRequestContext(
            session=session,
            lifespan_context=None,
            protocol_version=version,
            method="tools/call",
            params=params,
            request_id=rid,
            meta=request_meta,
        )
        try:
            result = await self._gateway._call_tool(ctx, typed)
            if isinstance(result, sdk.ErrorData):
                raise sdk.MCPError.from_error_data(result)
            shaped = self._runner()._serialize("tools/call", version, result)
        finally:
            if getattr(connection.exit_stack, "_exit_callbacks", True):  # as serve_one does
                await sdk.aclose_shielded(connection)
            elif not connection.state:  # as it was made: the next call may use it
                self._kept = (envelope, connection)
        return response_line(rid, shaped)

    def _connection(self, envelope: tuple[str, Any, Any]) -> Any:
        """The connection of a call (what the SDK's ``Connection.from_envelope`` makes for
        its ``envelope``: version, client info, capabilities). The last call's is used
        again when its envelope is the same and the call left it as it was made (no
        state, no exit callbacks); it is handed to one call at a time."""
        kept, self._kept = self._kept, None
        if kept is not None and kept[0] == envelope:
            return kept[1]
        version, info, capabilities = envelope
        sdk = sdk_names()
        return sdk.Connection.from_envelope(
            version, info, capabilities, outbound=sdk.NotifyOnlyOutbound(self._channel)
        )

    def _runner(self) -> Any:
        """The SDK's runner, for its result serializer (``_serialize`` uses the server's
        cache hints and stamp only), made once: the same shaping, the stamp not copied."""
        runner = self._serializer
        if runner is None:
            server = self._gateway.server  # type: ignore[attr-defined]
            runner = self._serializer = sdk_names().ServerRunner(_Stamp(server), None, None)
        return runner

    async def send(self, line: str, written: Callable[[], None] | None = None) -> None:
        """One message to the caller (a gone caller: dropped, as the SDK drops it);
        ``written`` runs once the bytes went to the pipe (or its buffer), before waiting
        for the pipe to take them all."""
        with contextlib.suppress(OSError, RuntimeError):
            await self._out.write(line + "\n")
            if written is not None:
                written()
            await self._out.flush()

    async def _finish(self) -> None:
        """Stdin ended: the calls in flight get ``FINISH_S`` to finish, then are cancelled."""
        pending = list(self._inflight.values())
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=FINISH_S)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=FINISH_S)


def _era_of(line: str) -> str | None:
    """The era a line opens when it is the first request the SDK sees (``None``: not a
    request, the SDK goes on waiting for one): the SDK's own parse of the line, and its
    own rule (``serve_dual_era_loop``)."""
    from mcp.server.runner import _has_modern_envelope
    from mcp.types import JSONRPCRequest, jsonrpc_message_adapter

    try:
        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception:  # the SDK hands it on as an error: not the opening request
        return None
    if not isinstance(message, JSONRPCRequest):
        return None
    if message.method != "initialize" and _has_modern_envelope(message.params):
        return "modern"
    return "legacy"


def _plain_call(line: str) -> tuple[Any, dict[str, Any], Any, Any] | None:
    """(id, params, typed params, the SDK's envelope route) of a plain ``tools/call`` the SDK
    would accept on a 2026-07-28 connection; ``None`` for anything else."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or not _MESSAGE_KEYS.issuperset(message):
        return None
    rid, params = message.get("id"), message.get("params")
    if message.get("jsonrpc") != "2.0" or message.get("method") != "tools/call":
        return None
    if isinstance(rid, bool) or not isinstance(rid, int | str):
        return None
    if not isinstance(params, dict) or not _PLAIN_PARAMS.issuperset(params):
        return None
    name, meta = params.get("name"), params.get("_meta")
    if not isinstance(name, str) or name in META_TOOLS:
        return None
    if not isinstance(meta, dict) or "progressToken" in meta:
        return None
    sdk = sdk_names()
    route = sdk.classify_inbound_request(message)
    if isinstance(route, sdk.InboundLadderRejection):
        return None
    try:
        sdk.methods.validate_client_request("tools/call", route.protocol_version, params)
        typed = sdk.CallToolRequestParams.model_validate(params, by_name=False)
    except Exception:  # the SDK says what is wrong with it
        return None
    return rid, params, typed, route
