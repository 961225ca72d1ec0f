"""Pinned tools: the few a catalog or a role always sends, never deferred.

A tool used on almost every turn costs a search round-trip each time it is
deferred; pinning it (``PolicyConfig.pinned`` for every caller, ``pinned_roles``
per role) sends its schema up front. Pinning never entitles: only the pinned tools
the caller may use are sent, and their tokens are reported apart from the
shortlist's (``TokenReport.pinned``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from toolscout.discovery import inject as rendering
from toolscout.discovery.tokencount import count_json
from toolscout.policy import Entitlement, PolicyConfig, Principal

if TYPE_CHECKING:
    from toolscout.discovery.catalog import Catalog


def pinned_ids(policy: PolicyConfig, principal: Principal, ent: Entitlement) -> tuple[str, ...]:
    """The caller's pinned tools it may use: catalog pins, then its roles' pins (in role
    order, sorted), each once, in the order they were declared."""
    wanted: list[str] = list(policy.pinned)
    for role in sorted(principal.roles):
        wanted.extend(policy.pinned_roles.get(role, ()))
    allowed = ent.ids
    return tuple(dict.fromkeys(t for t in wanted if t in allowed))


def render_pinned(
    catalog: Catalog, ids: Sequence[str], fmt: str
) -> tuple[tuple[dict[str, Any], ...], dict[str, str], int]:
    """The pinned tools' schemas in ``fmt``, rendered name → id, and their token count."""
    if not ids:
        return (), {}, 0
    specs = catalog.specs_of(list(ids))
    names = catalog.names()
    schemas = tuple(rendering.render(specs, fmt, names))
    return schemas, {names[s.id]: s.id for s in specs}, count_json(list(schemas))
