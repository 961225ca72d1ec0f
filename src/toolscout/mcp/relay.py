"""The link between one caller's request and the upstream work it causes.

The gateway's request handlers set :data:`LINK` to a :class:`Link` around each
forwarded request (a tool call, a resource read, a prompt). The upstream side
finds it there and uses it to pass back, *to that caller*:

* progress (``notifications/progress`` on the caller's own token; each report
  also moves the call's deadline, see :meth:`Link.touch`);
* log messages the upstream sends while serving the request;
* server-to-client requests (sampling, elicitation, roots), answered by the
  caller's client and returned to the upstream.

It also carries back what a failed upstream call said (its content, secrets
redacted), so the caller gets the upstream's own words beside the reason code.

Each upstream session has a :class:`Relay`: the client capabilities it declares
upstream (a caller's own session mirrors that caller's client), the links of the
requests in flight over it, and the link of the caller it belongs to, for what an
upstream asks outside any request (a filesystem server asking for roots when it
starts).
"""

from __future__ import annotations

import contextlib
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CAPABILITIES", "LINK", "Link", "Relay", "capabilities_of"]

#: the client capabilities a gateway can relay (declared upstream per caller)
CAPABILITIES = frozenset({"elicitation", "roots", "sampling"})


def capabilities_of(session: Any) -> frozenset[str]:
    """Which of :data:`CAPABILITIES` the client behind ``session`` declared."""
    caps = getattr(session, "client_capabilities", None) if session is not None else None
    if caps is None:
        return frozenset()
    return frozenset(c for c in CAPABILITIES if getattr(caps, c, None) is not None)


@dataclass(eq=False)
class Link:
    """One caller's in-flight request: where its progress, logs and questions go."""

    ctx: Any
    #: the caller's key (tenant and subject) when each caller has its own upstream sessions
    caller: str | None = None
    #: the upstream's ``isError`` result (wire form, secrets redacted), when it failed so
    error: dict[str, Any] | None = None
    #: monotonic time of the last sign of life (progress) from the upstream
    last_seen: float = field(default_factory=time.monotonic)
    #: a link kept past its request (a session's owner): its requests stand alone
    standalone: bool = False
    #: a task-augmented call: the caller's ``task`` metadata (2025-11-25 tasks)
    task: dict[str, Any] | None = None
    #: the upstream session that created the caller's task (set by the call)
    task_session: Any = None
    #: how questions reach a 2026-07-28 caller (an input-required round, mcp/rounds.py)
    asker: Any = None
    #: (the ``ctx`` they were read from, :attr:`capabilities`): a call asks more than once
    _caps: tuple[Any, frozenset[str]] | None = field(default=None, init=False, repr=False)

    @property
    def solo(self) -> bool:
        """Over stdio (or in-process) there is one client: no HTTP request behind ``ctx``."""
        return getattr(self.ctx, "request", None) is None

    @property
    def capabilities(self) -> frozenset[str]:
        """The relayable client capabilities the caller's client declared (read once per
        ``ctx``: a retry's round points the link at its new request)."""
        ctx, kept = self.ctx, self._caps
        if kept is not None and kept[0] is ctx:
            return kept[1]
        caps = capabilities_of(getattr(ctx, "session", None))
        self._caps = (ctx, caps)
        return caps

    def detached(self) -> Link:
        """This caller's client, for requests outside this request (no progress, no error):
        ``dataclasses.replace(self, error=None, standalone=True, task=None,
        task_session=None, asker=None)``, built directly (a call's route makes one)."""
        return Link(self.ctx, self.caller, last_seen=self.last_seen, standalone=True)

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    @property
    def related(self) -> Any:
        return None if self.standalone else getattr(self.ctx, "request_id", None)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Forward one progress report on the caller's token (nothing if it asked for none)."""
        self.touch()
        session = getattr(self.ctx, "session", None)
        if session is not None:
            await session.report_progress(progress, total, message)

    async def log(self, params: Any) -> None:
        """Forward one upstream log message on the caller's request stream."""
        import warnings

        session = getattr(self.ctx, "session", None)
        if session is None:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # logging is deprecated in 2026-07-28, not gone
            await session.send_log_message(
                params.level, params.data, params.logger, related_request_id=self.related
            )

    def client_supports(self, capability: str) -> bool:
        """Whether the caller's client declared ``capability`` (sampling, elicitation, roots)."""
        return capability in self.capabilities

    async def ask(self, request: Any, result_type: type[Any]) -> Any:
        """Send a server-to-client request to the caller's client; its typed answer."""
        from mcp.shared.message import ServerMessageMetadata

        self.touch()
        if self.asker is not None:  # a 2026-07-28 caller: the question goes in its answer
            answer = await self.asker(request, result_type)
            self.touch()
            return answer
        version = getattr(self.ctx, "protocol_version", None)
        if version in _modern():  # it cannot be sent a request: say where it could be asked
            from mcp import MCPError
            from mcp.types import INVALID_REQUEST

            raise MCPError(
                INVALID_REQUEST,
                f"the client behind the toolscout gateway speaks MCP {version}, where a server "
                "can ask its client only in answer to a tools/call, prompts/get or "
                "resources/read (an input-required result), not during this request",
            )
        related = self.related
        metadata = (
            ServerMessageMetadata(related_request_id=related) if related is not None else None
        )
        answer = await self.ctx.session.send_request(request, result_type, metadata=metadata)
        self.touch()
        return answer


class Relay:
    """The server-to-client side of one upstream session.

    ``capabilities`` are the client capabilities declared upstream (``None``: all of
    :data:`CAPABILITIES`, for a session shared by callers); a request for one goes to
    the caller whose request the upstream is serving (the latest in flight), else to
    the session's :attr:`owner`; a caller whose client lacks the capability gets the
    upstream an error naming it."""

    def __init__(self, capabilities: frozenset[str] | None = None) -> None:
        self.capabilities = CAPABILITIES if capabilities is None else capabilities & CAPABILITIES
        #: the callers' requests in flight over this session
        self.active: list[Link] = []
        #: the caller this session belongs to (its latest client), for requests outside a call
        self.owner: Link | None = None

    def callbacks(self) -> dict[str, Any]:
        """The SDK ``Client`` callbacks: one per declared capability (the SDK declares a
        capability exactly when its callback is given), and the log handler."""
        out: dict[str, Any] = {"logging_callback": self._on_log}
        if "sampling" in self.capabilities:
            out["sampling_callback"] = self._on_sampling
        if "elicitation" in self.capabilities:
            out["elicitation_callback"] = self._on_elicitation
        if "roots" in self.capabilities:
            out["list_roots_callback"] = self._on_roots
        return out

    def target(self) -> Link | None:
        """The caller being served: the latest request in flight, else the owner."""
        return self.active[-1] if self.active else self.owner

    async def _relay(self, capability: str, request: Any, result_type: type[Any]) -> Any:
        from mcp import MCPError
        from mcp.types import INVALID_REQUEST, ErrorData

        link = self.target()
        if link is None or not link.client_supports(capability):
            return ErrorData(
                code=INVALID_REQUEST,
                message=f"the client behind the toolscout gateway does not support {capability}",
            )
        try:
            return await link.ask(request, result_type)
        except MCPError as exc:
            return ErrorData(code=exc.code, message=exc.message, data=exc.data)
        except Exception as exc:  # a gone client: the upstream gets an error, not a hang
            return ErrorData(
                code=INVALID_REQUEST, message=f"the client behind the gateway is gone: {exc}"
            )

    async def _on_sampling(self, context: Any, params: Any) -> Any:
        from mcp.types import CreateMessageRequest, CreateMessageResult

        return await self._relay(
            "sampling", CreateMessageRequest(params=params), CreateMessageResult
        )

    async def _on_elicitation(self, context: Any, params: Any) -> Any:
        from mcp.types import ElicitRequest, ElicitResult

        return await self._relay("elicitation", ElicitRequest(params=params), ElicitResult)

    async def _on_roots(self, context: Any) -> Any:
        from mcp.types import ListRootsRequest, ListRootsResult

        return await self._relay("roots", ListRootsRequest(), ListRootsResult)

    async def _on_log(self, params: Any) -> None:
        link = self.active[-1] if self.active else None
        if link is not None:
            with contextlib.suppress(Exception):  # a gone caller: the log line is dropped
                await link.log(params)


def _modern() -> frozenset[str]:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return frozenset(MODERN_PROTOCOL_VERSIONS)


#: the link of the request being served in this task (set by the gateway's handlers)
LINK: ContextVar[Link | None] = ContextVar("toolscout_mcp_link", default=None)
