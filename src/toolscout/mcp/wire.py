"""Wire-form helpers shared by the upstream side: SDK models as dicts, pages, faults."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolscout.redact import redact

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["Notice", "describe", "observe", "pages", "raw_request", "redacted", "wire"]


@dataclass(frozen=True)
class Notice:
    """An upstream notification the SDK has no type for: its method and wire params."""

    method: str
    params: dict[str, Any]


async def pages(fetch: Callable[..., Awaitable[Any]], attr: str) -> list[dict[str, Any]]:
    """Every page of a paginated list, in wire form."""
    out: list[dict[str, Any]] = []
    cursor = None
    for _ in range(1000):
        page = await fetch(cursor=cursor)
        out += [wire(item) for item in getattr(page, attr)]
        cursor = page.next_cursor
        if cursor is None:
            break
    return out


def redacted(value: Any) -> Any:
    """A wire value with secrets taken out of every string in it."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redacted(v) for v in value]
    if isinstance(value, dict):
        return {k: redacted(v) if k != "data" else v for k, v in value.items()}
    return value


def wire(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


def describe(exc: BaseException) -> str:
    """One line about a (possibly grouped) exception."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def raw_request(client: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One request over an SDK ``Client``'s session, its result as the upstream sent it.

    For the tasks of the 2025-11-25 protocol: the SDK (2.3) defines their types but
    neither sends their methods nor accepts a ``CreateTaskResult`` for ``tools/call``
    (its result check wants a ``CallToolResult``), so this sends through the session's
    own stamping and dispatcher, as ``ClientSession.send_request`` does, without that
    check. Nothing else goes this way."""
    session = client.session
    data: dict[str, Any] = {"method": method, "params": params}
    opts: dict[str, Any] = {}
    session._stamp(data, opts)
    answer: dict[str, Any] = await session._dispatcher.send_raw_request(
        method, data.get("params"), opts
    )
    return answer


def observe(client: Any, method: str, handler: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    """Have an SDK ``Client`` (not yet entered) hand ``handler`` the params of each ``method``
    notification its server sends, in wire form.

    For ``notifications/tasks/status`` (2025-11-25): the SDK (2.3) leaves it out of its
    notification tables, so its session drops it unless a notification binding observes
    it. Bindings come only from client extensions, which would also be *advertised*
    upstream; this adds the binding alone to the client's folded extensions (a private
    field, read when the client builds its session), advertising nothing."""
    import dataclasses

    from mcp.client.extension import NotificationBinding

    async def deliver(params: BaseModel) -> None:
        await handler(params.model_dump(mode="json", by_alias=True, exclude_none=True))

    folded = client._folded_extensions
    binding = NotificationBinding(method=method, params_type=_any_params(), handler=deliver)
    client._folded_extensions = dataclasses.replace(
        folded, bindings=(*(folded.bindings or ()), binding)
    )


@functools.cache
def _any_params() -> type[BaseModel]:
    from pydantic import BaseModel, ConfigDict

    class AnyParams(BaseModel):
        """Notification params kept as they came (every field)."""

        model_config = ConfigDict(extra="allow")

    return AnyParams
