"""Wire-form helpers shared by the upstream side: SDK models as dicts, pages, faults."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from toolscout.redact import redact

__all__ = ["describe", "pages", "raw_request", "redacted", "wire"]


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
