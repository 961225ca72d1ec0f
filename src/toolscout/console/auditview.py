"""The audit page: the audit log's rows filtered by subject, tool, outcome and time,
with the chain's verification and head (:class:`toolscout.gateway.audit.AuditLog`).

A tenant administrator reads its own tenant's rows only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from toolscout.console.access import Level, sees_tenant
from toolscout.policy import Principal

PAGE = 50
#: the most recent rows read for one page of filters
READ_LIMIT = 20_000
OUTCOMES = ("allowed", "denied", "error")


@dataclass(frozen=True, slots=True)
class Query:
    subject: str = ""
    tool: str = ""
    outcome: str = ""
    since: str = ""  # ISO date or datetime, inclusive
    until: str = ""


def _when(text: str) -> float | None:
    if not text.strip():
        return None
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        return None


def page(
    service: Any, viewer: Principal, level: Level, query: Query, number: int
) -> dict[str, Any]:
    audit = service.audit
    since, until = _when(query.since), _when(query.until)
    errors = [
        f"{name}: {text!r} is not a date like 2026-12-01 or 2026-12-01T17:00"
        for name, text, value in (("since", query.since, since), ("until", query.until, until))
        if text.strip() and value is None
    ]
    rows = audit.read(since=since, subject=query.subject or None, limit=READ_LIMIT, outcomes=True)
    keep = [
        r
        for r in rows
        if sees_tenant(viewer, level, r.tenant)
        and (not query.tool or query.tool.lower() in r.tool_id.lower())
        and (not query.outcome or r.decision == query.outcome)
        and (until is None or r.ts <= until)
    ]
    keep.reverse()  # newest first
    pages = max((len(keep) + PAGE - 1) // PAGE, 1)
    number = min(max(number, 1), pages)
    verification = audit.verify()
    return {
        "rows": keep[(number - 1) * PAGE : number * PAGE],
        "matched": len(keep),
        "page": number,
        "pages": pages,
        "query": query,
        "outcomes": OUTCOMES,
        "errors": errors,
        "verification": verification,
        "head": str(audit.head()),
        "keyed": bool(getattr(audit, "keyed", False)),
    }


__all__ = ["OUTCOMES", "Query", "page"]
