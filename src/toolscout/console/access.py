"""Who may see what in the console: the one place the console asks the policy.

Administration has two levels (:func:`toolscout.policy.may_administer`): a *tenant
administrator* holds the exact policy admin scope and a tenant, and sees and
administers only the tools offered to that tenant; a *platform administrator* holds
the policy's platform scope and administers everything. :func:`admin_level` is the
policy's own answer; the helpers below say what each level may *see*.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolscout.cards import CapabilityCard
from toolscout.policy import AdminAction, PolicyConfig, Principal, admin_level, may_administer
from toolscout.policy import AdminLevel as Level


def platform_scope(policy: PolicyConfig) -> str:
    return policy.platform_scope


def sees_tool(viewer: Principal, level: Level, card: CapabilityCard) -> bool:
    """May an administrator look at this tool (its card, lint, misses, hidden status)?

    A tenant administrator sees the tools offered to its tenant: its own and the shared
    (untenanted) ones its users may be given; never a tool offered only to others."""
    if level is Level.PLATFORM:
        return True
    if level is Level.TENANT:
        return not card.tenants or viewer.tenant in card.tenants
    return False


def owns_tool(viewer: Principal, policy: PolicyConfig, tenants: Sequence[str]) -> bool:
    """May ``viewer`` change a tool offered to ``tenants`` (accept an alias for it)? The
    policy's answer: a tenant administrator only when the tool is offered to exactly its
    own tenant; an untenanted or multi-tenant tool is the platform's."""
    return may_administer(viewer, policy, AdminAction.CHANGE_TOOL, tenants).allowed


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
    "Level",
    "admin_level",
    "owns_tool",
    "platform_scope",
    "sees_tenant",
    "sees_tool",
    "shown_tenants",
]
