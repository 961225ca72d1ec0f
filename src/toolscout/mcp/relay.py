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
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LINK", "Link"]


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

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    @property
    def related(self) -> Any:
        return getattr(self.ctx, "request_id", None)

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
        session = getattr(self.ctx, "session", None)
        caps = getattr(session, "client_capabilities", None) if session is not None else None
        return caps is not None and getattr(caps, capability, None) is not None

    async def ask(self, request: Any, result_type: type[Any]) -> Any:
        """Send a server-to-client request to the caller's client; its typed answer."""
        from mcp.shared.message import ServerMessageMetadata

        self.touch()
        answer = await self.ctx.session.send_request(
            request, result_type, metadata=ServerMessageMetadata(related_request_id=self.related)
        )
        self.touch()
        return answer


#: the link of the request being served in this task (set by the gateway's handlers)
LINK: ContextVar[Link | None] = ContextVar("toolscout_mcp_link", default=None)
