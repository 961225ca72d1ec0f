"""Who may see what in the console: the one place the console asks the policy.

Administration has two levels (issue 20): a *tenant administrator* holds the exact
policy admin scope (``toolscout:admin``, never through a wildcard) and a tenant, and
sees and administers only the tools offered to that tenant; a *platform
administrator* holds a distinct platform scope and administers everything.

:func:`admin_level` is the single call into :mod:`toolscout.policy`; when the policy
gains its own ``admin_level`` / ``may_administer`` the body of that function becomes
one line calling it, and every page follows.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

from toolscout.cards import CapabilityCard
from toolscout.policy import PolicyConfig, Principal

#: the platform administrator scope, until the policy names its own (``platform_scope``)
DEFAULT_PLATFORM_SCOPE = "toolscout:platform"


class Level(IntEnum):
    """How far a principal administers the catalog (a higher level can do more)."""

    NONE = 0
    TENANT = 1
    PLATFORM = 2


def platform_scope(policy: PolicyConfig) -> str:
    return str(getattr(policy, "platform_scope", DEFAULT_PLATFORM_SCOPE))


def admin_level(principal: Principal, policy: PolicyConfig) -> Level:
    """The principal's administration level: exact scopes only, never a wildcard; an
    admin scope without a tenant administers nothing."""
    granted = policy.effective_scopes(principal)  # the policy's own expansion of roles
    if platform_scope(policy) in granted:
        return Level.PLATFORM
    if policy.admin_scope in granted and principal.tenant:
        return Level.TENANT
    return Level.NONE


def sees_tool(viewer: Principal, level: Level, card: CapabilityCard) -> bool:
    """May an administrator look at this tool (its card, lint, misses, hidden status)?

    A tenant administrator sees the tools offered to its tenant: its own and the shared
    (untenanted) ones its users may be given; never a tool offered only to others."""
    if level is Level.PLATFORM:
        return True
    if level is Level.TENANT:
        return not card.tenants or viewer.tenant in card.tenants
    return False


def owns_tool(viewer: Principal, level: Level, tenants: Sequence[str]) -> bool:
    """May an administrator change a tool offered to ``tenants`` (accept an alias for it)?

    A tenant administrator only when the tool is offered to exactly its own tenant; an
    untenanted or multi-tenant tool is the platform's."""
    if level is Level.PLATFORM:
        return True
    return level is Level.TENANT and set(tenants) == {viewer.tenant}


def sees_tenant(viewer: Principal, level: Level, tenant: str) -> bool:
    """May an administrator act as, or read the records of, a principal of ``tenant``?"""
    return level is Level.PLATFORM or (level is Level.TENANT and tenant == viewer.tenant)


def shown_tenants(viewer: Principal, level: Level, card: CapabilityCard) -> str:
    """A card's tenants as this viewer may read them (no other tenant's name for a tenant
    administrator)."""
    if not card.tenants:
        return "shared (every tenant)"
    if level is Level.PLATFORM:
        return ", ".join(card.tenants)
    others = len(set(card.tenants) - {viewer.tenant})
    return viewer.tenant + (f" (+{others} other)" if others else "")


__all__ = [
    "DEFAULT_PLATFORM_SCOPE",
    "Level",
    "admin_level",
    "owns_tool",
    "platform_scope",
    "sees_tenant",
    "sees_tool",
    "shown_tenants",
]
