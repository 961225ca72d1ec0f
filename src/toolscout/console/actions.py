"""The console's one administrative action: accept an alias the usage report suggests.

The same action as ``toolscout report --accept``, through the catalog's administration
(:meth:`toolscout.administration.Administration.accept_aliases`): decided by
:func:`toolscout.policy.may_administer` and audited like any administrative change
(who, which tool, its digest before → after; a refused attempt too).
"""

from __future__ import annotations

from typing import Any

from toolscout.console.access import Level, sees_tenant, sees_tool
from toolscout.errors import AdminDenied
from toolscout.policy import Principal
from toolscout.telemetry.report import AcceptedAlias, report_for


def accept_alias(
    service: Any, viewer: Principal, level: Level, suggestion_id: str
) -> AcceptedAlias | str:
    """Accept one suggestion for ``viewer``; a refusal comes back as its message."""
    catalog = service.catalog
    found = {s.id: s for s in report_for(catalog).suggestions}.get(suggestion_id)
    card = catalog.card(found.tool_id) if found is not None else None
    if found is None or card is None or not sees_tool(viewer, level, card):
        return f"No current alias suggestion {suggestion_id[:40]!r}: reload the page."
    if not sees_tenant(viewer, level, found.tenant):
        return f"No current alias suggestion {suggestion_id[:40]!r}: reload the page."
    try:
        (done,) = service.admin.accept_aliases(viewer, [suggestion_id])
    except AdminDenied:
        return (
            f"{found.tool_id} is offered to "
            f"{'every tenant' if not card.tenants else 'more than your tenant'}: "
            "only a platform administrator may change it."
        )
    result: AcceptedAlias = done
    return result


__all__ = ["accept_alias"]
