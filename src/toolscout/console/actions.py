"""The console's one administrative action: accept an alias the usage report suggests.

The same action as ``toolscout report --accept`` (:func:`toolscout.telemetry.report.
accept_alias`), after the administration check, and audited like any administrative
change: who, which tool, the tool's stored digest before → after, and the evidence;
a refused attempt is audited too.
"""

from __future__ import annotations

from typing import Any

from toolscout.console.access import Level, owns_tool, sees_tenant, sees_tool
from toolscout.policy import Principal
from toolscout.telemetry.report import AcceptedAlias, report_for

ACTION = "admin:accept_alias"


def _digest(service: Any, tool_id: str) -> str:
    return str(service.catalog.store.content_hashes([tool_id]).get(tool_id, ""))[:16] or "-"


def _audit(
    service: Any, who: Principal, tool_id: str, change: str, decision: str, detail: str
) -> None:
    service.audit.append(
        subject=who.subject,
        tenant=who.tenant,
        tool_id=tool_id,
        args_digest=change,
        decision=decision,
        reason=ACTION if decision == "allowed" else "forbidden",
        latency_ms=0.0,
        status="changed" if decision == "allowed" else "refused",
        detail=detail,
    )


def accept_alias(
    service: Any, viewer: Principal, level: Level, suggestion_id: str
) -> AcceptedAlias | str:
    """Accept one suggestion for ``viewer``; a refusal comes back as its message."""
    from toolscout.telemetry.report import accept_alias as accept

    catalog = service.catalog
    found = {s.id: s for s in report_for(catalog).suggestions}.get(suggestion_id)
    card = catalog.card(found.tool_id) if found is not None else None
    if found is None or card is None or not sees_tool(viewer, level, card):
        return f"No current alias suggestion {suggestion_id[:40]!r}: reload the page."
    if not (owns_tool(viewer, level, card.tenants) and sees_tenant(viewer, level, found.tenant)):
        _audit(service, viewer, found.tool_id, "-", "denied",
               f"accept alias {found.alias!r}: not an administrator of this tool")  # fmt: skip
        return (
            f"{found.tool_id} is offered to "
            f"{'every tenant' if not card.tenants else 'more than your tenant'}: "
            "only a platform administrator may change it."
        )
    before = _digest(service, found.tool_id)
    done = accept(catalog, suggestion_id)
    after = _digest(service, found.tool_id)
    s = done.suggestion
    _audit(
        service,
        viewer,
        s.tool_id,
        f"{before}->{after}",
        "allowed",
        f"alias {s.alias!r} accepted from the usage report ({s.times} misses, "
        f"{s.subjects} callers, tenant {s.tenant or '-'}, suggestion {s.id})",
    )
    return done


__all__ = ["ACTION", "accept_alias"]
