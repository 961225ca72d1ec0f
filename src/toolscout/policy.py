"""Entitlement and administration: may this principal use this tool, administer that.

One function, :func:`decide`, answers for discovery (before any ranking) and for
the execution gateway (before any call). It reads the principal, the card and
the configuration — never the query, never anything the model produced.

One function, :func:`may_administer`, answers "may this principal change the
catalog here" for every surface (library, HTTP, CLI, MCP, console). Administration
has two levels, each held only through its exact scope — no wildcard grants either:

* a **tenant administrator** holds :attr:`PolicyConfig.admin_scope` and has a tenant;
  it changes only tools offered to exactly its own tenant;
* a **platform administrator** holds :attr:`PolicyConfig.platform_scope`; it alone
  changes untenanted or multi-tenant tools, replaces the whole catalog or the policy,
  and forces an import past its protections.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from functools import lru_cache

from toolscout.cards import CapabilityCard, Risk
from toolscout.errors import ConfigError

DEFAULT_ADMIN_SCOPE = "toolscout:admin"
DEFAULT_PLATFORM_SCOPE = "toolscout:platform"


class Reason(StrEnum):
    """Why a principal may not use a tool. Stable codes for audit and debugging."""

    UNKNOWN_TOOL = "unknown_tool"
    TENANT = "tenant_mismatch"
    MISSING_SCOPE = "missing_scope"
    ADMIN_REQUIRED = "admin_scope_required"
    #: administration: the principal administers nothing
    NOT_ADMIN = "not_an_administrator"
    #: administration: a tenant administrator asked for what only the platform may do
    PLATFORM_REQUIRED = "platform_admin_required"
    #: administration: the tool is not offered to exactly the administrator's own tenant
    OUTSIDE_TENANT = "outside_own_tenant"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking: verified subject, tenant, scopes and roles."""

    subject: str
    tenant: str = ""
    scopes: frozenset[str] = frozenset()
    roles: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        subject: str,
        tenant: str = "",
        scopes: Iterable[str] = (),
        roles: Iterable[str] = (),
    ) -> Principal:
        return cls(subject, tenant, frozenset(scopes), frozenset(roles))


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """Role → scope grants, the names of the two explicit administration scopes, and
    pinned tools.

    ``admin_scope`` makes a tenant administrator (and is needed to use admin- and
    destructive-risk tools); ``platform_scope`` makes a platform administrator.
    ``pinned`` tool ids are sent to every caller entitled to them on every turn and
    never deferred; ``pinned_roles`` pins more per role. Pinning never entitles: a
    pinned tool the caller may not use is not sent (discovery/pinned.py)."""

    roles: Mapping[str, Sequence[str]] = field(default_factory=dict)
    admin_scope: str = DEFAULT_ADMIN_SCOPE
    platform_scope: str = DEFAULT_PLATFORM_SCOPE
    pinned: tuple[str, ...] = ()
    pinned_roles: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("admin_scope", "platform_scope"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value or "*" in value:
                raise ConfigError(f"policy {name!r} must be a concrete scope name, got {value!r}")
        if self.admin_scope == self.platform_scope:
            raise ConfigError(
                "policy 'admin_scope' and 'platform_scope' must differ: "
                f"both are {self.admin_scope!r}"
            )

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> PolicyConfig:
        known = {"roles", "admin_scope", "platform_scope", "pinned", "pinned_roles"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"policy has unknown keys: {', '.join(map(str, unknown))}")
        roles = data.get("roles", {})
        admin = data.get("admin_scope", DEFAULT_ADMIN_SCOPE)
        platform = data.get("platform_scope", DEFAULT_PLATFORM_SCOPE)
        if not isinstance(roles, Mapping) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(s, str) for s in v)
            for k, v in roles.items()
        ):
            raise ConfigError("policy 'roles' must map role names to lists of scopes")
        if not isinstance(admin, str) or not isinstance(platform, str):
            raise ConfigError("policy 'admin_scope' and 'platform_scope' must be scope names")
        pinned = data.get("pinned", [])
        if not isinstance(pinned, list) or not all(isinstance(t, str) and t for t in pinned):
            raise ConfigError("policy 'pinned' must be a list of tool ids")
        pinned_roles = data.get("pinned_roles", {})
        if not isinstance(pinned_roles, Mapping) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(t, str) and t for t in v)
            for k, v in pinned_roles.items()
        ):
            raise ConfigError("policy 'pinned_roles' must map role names to lists of tool ids")
        return cls(
            roles={k: tuple(v) for k, v in roles.items()},
            admin_scope=admin,
            platform_scope=platform,
            pinned=tuple(pinned),
            pinned_roles={k: tuple(v) for k, v in pinned_roles.items()},
        )

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "roles": {k: list(v) for k, v in self.roles.items()},
            "admin_scope": self.admin_scope,
            "platform_scope": self.platform_scope,
        }
        if self.pinned:
            out["pinned"] = list(self.pinned)
        if self.pinned_roles:
            out["pinned_roles"] = {k: list(v) for k, v in self.pinned_roles.items()}
        return out

    def effective_scopes(self, principal: Principal) -> frozenset[str]:
        """The principal's own scopes plus those its roles grant."""
        granted = set(principal.scopes)
        for role in principal.roles:
            granted.update(self.roles.get(role, ()))
        return frozenset(granted)


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer to "may P use T"; ``detail`` is for audit, never for the model."""

    allowed: bool
    reason: Reason | None = None
    detail: str = ""


ALLOW = Decision(True)


@lru_cache(maxsize=4096)
def _pattern_matches(pattern: str, scope: str) -> bool:
    """``billing:*`` matches ``billing:write`` and ``billing:refund:full``; ``*`` matches all.

    A ``*`` segment in the middle matches exactly one segment (``*:read``).
    """
    if pattern == scope:
        return True
    if "*" not in pattern:
        return False
    p_parts, s_parts = pattern.split(":"), scope.split(":")
    for i, part in enumerate(p_parts):
        last = i == len(p_parts) - 1
        if part == "*" and last:
            return len(s_parts) >= len(p_parts)
        if i >= len(s_parts) or (part != "*" and part != s_parts[i]):
            return False
    return len(p_parts) == len(s_parts)


def holds(granted: frozenset[str], scope: str) -> bool:
    """Does a set of (possibly wildcard) granted scopes cover one concrete scope?"""
    return scope in granted or any(_pattern_matches(g, scope) for g in granted if "*" in g)


def decide_scopes(
    granted: frozenset[str],
    tenant: str,
    card: CapabilityCard,
    admin_scope: str,
) -> Decision:
    """The policy core over already-expanded scopes (see :func:`decide`)."""
    if card.tenants and tenant not in card.tenants:
        return Decision(False, Reason.TENANT, f"tool {card.id} is not offered to tenant {tenant!r}")
    # the admin scope is never granted by a wildcard, even when a card requires it by name
    missing = [
        s for s in card.scopes if not (s in granted if s == admin_scope else holds(granted, s))
    ]
    if missing:
        return Decision(False, Reason.MISSING_SCOPE, f"tool {card.id} needs {', '.join(missing)}")
    # the admin scope must be held explicitly: a wildcard never grants it
    if card.risk.privileged and admin_scope not in granted:
        return Decision(
            False,
            Reason.ADMIN_REQUIRED,
            f"tool {card.id} is {card.risk.value}-risk and needs the explicit scope {admin_scope}",
        )
    return ALLOW


def decide(principal: Principal, card: CapabilityCard | None, config: PolicyConfig) -> Decision:
    """May ``principal`` use the tool described by ``card``? ``None`` means unknown tool."""
    if card is None:
        return Decision(False, Reason.UNKNOWN_TOOL, "no such tool in the catalog")
    return decide_scopes(
        config.effective_scopes(principal), principal.tenant, card, config.admin_scope
    )


class AdminLevel(IntEnum):
    """How far a principal administers the catalog (ordered: a higher level can do more)."""

    NONE = 0
    TENANT = 1
    PLATFORM = 2


class AdminAction(StrEnum):
    """What an administrator asks to do."""

    #: read the administrative views (hidden-tool counts, audit, lint) of one's share
    VIEW = "view"
    #: add, change, delete one tool or accept an alias for it (``tenants`` before and after)
    CHANGE_TOOL = "change_tool"
    #: drop every stored tool an import does not name
    REPLACE_ALL = "replace_all"
    #: store a new policy (roles, admin scopes)
    REPLACE_POLICY = "replace_policy"
    #: accept an import its protections refused (another source's tool, widened access)
    FORCE = "force"
    #: catalog-wide settings (the confidence correction, re-learning aliases)
    CATALOG = "catalog"


def admin_level(principal: Principal, config: PolicyConfig) -> AdminLevel:
    """The principal's administration level; only the exact scopes count, never a wildcard.

    A tenant administrator needs a tenant: an admin scope without one administers nothing."""
    granted = config.effective_scopes(principal)
    if config.platform_scope in granted:
        return AdminLevel.PLATFORM
    if config.admin_scope in granted and principal.tenant:
        return AdminLevel.TENANT
    return AdminLevel.NONE


def may_administer(
    principal: Principal,
    config: PolicyConfig,
    action: AdminAction,
    tenants: Sequence[str] | None = None,
) -> Decision:
    """May ``principal`` do ``action``? The one answer every surface asks.

    For :attr:`AdminAction.CHANGE_TOOL`, ``tenants`` are the tool's tenants (ask once
    for the stored tool and once for the incoming one): a tenant administrator may
    change a tool only when they are exactly its own tenant; an untenanted or
    multi-tenant tool is the platform's. ``detail`` is for the audit."""
    level = admin_level(principal, config)
    who = f"{principal.subject}@{principal.tenant}" if principal.tenant else principal.subject
    if level is AdminLevel.NONE:
        return Decision(
            False,
            Reason.NOT_ADMIN,
            f"{who} holds neither {config.admin_scope} (with a tenant) nor {config.platform_scope}",
        )
    if level is AdminLevel.PLATFORM or action is AdminAction.VIEW:
        return ALLOW
    if action is not AdminAction.CHANGE_TOOL:
        return Decision(
            False,
            Reason.PLATFORM_REQUIRED,
            f"{action.value} needs the platform administrator scope {config.platform_scope}",
        )
    if tenants is None:
        raise ValueError("may_administer(CHANGE_TOOL) needs the tool's tenants")
    if set(tenants) != {principal.tenant}:
        offered = ", ".join(sorted(set(tenants))) or "every tenant"
        return Decision(
            False,
            Reason.OUTSIDE_TENANT,
            f"{who} administers only tools offered to exactly {principal.tenant!r} "
            f"(this one: {offered})",
        )
    return ALLOW


@dataclass(frozen=True, slots=True)
class Entitlement:
    """The cards a principal may use, and how many were filtered out and why."""

    allowed: tuple[CapabilityCard, ...]
    denied: Mapping[Reason, int]
    ids: frozenset[str] = frozenset()
    #: the allowed cards by id (built once per entitlement, which the catalog caches)
    by_id: Mapping[str, CapabilityCard] = field(default_factory=dict)

    @property
    def filtered(self) -> int:
        return sum(self.denied.values())


#: the risks :attr:`Risk.privileged` names (what a decision reads of a card's risk)
_PRIVILEGED = frozenset(r for r in Risk if r.privileged)


class TenantIndex:
    """The cards of a catalog by the tenant they are offered to, in catalog order.

    :func:`decide_scopes` refuses a card offered to other tenants before it looks at
    anything else, so the cards a tenant could ever be entitled to are the untenanted
    ones plus those naming it: :func:`entitle` checks only those, and counts the rest
    as refused for :attr:`Reason.TENANT` without visiting them. On a catalog where
    hundreds of tenants register their own tools this is the difference between one
    pass over every card and one over a tenant's share.

    Built lazily: the tenants' positions on the first question (one pass reading each
    card's tenants, no more); or, given ``share`` (a store that can say which cards a
    tenant is offered, and ``total`` cards in all), each tenant's share read when that
    tenant is first asked about, so the other cards are never read at all."""

    def __init__(
        self,
        cards: Sequence[CapabilityCard] = (),
        *,
        share: Callable[[str], Sequence[CapabilityCard]] | None = None,
        total: int | None = None,
    ) -> None:
        if share is not None and total is None:
            raise ValueError("TenantIndex(share=...) needs the catalog's total")
        self.cards = cards
        self._share = share
        self._total = len(cards) if total is None else total
        self._shared: list[int] = []
        self._by_tenant: dict[str, list[int]] | None = None
        self._lock = threading.Lock()

    def _positions(self) -> dict[str, list[int]]:
        with self._lock:
            if self._by_tenant is None:
                shared: list[int] = []
                by_tenant: dict[str, list[int]] = {}
                for i, card in enumerate(self.cards):
                    if not card.tenants:
                        shared.append(i)
                    for tenant in dict.fromkeys(card.tenants):
                        by_tenant.setdefault(tenant, []).append(i)
                self._shared, self._by_tenant = shared, by_tenant
            return self._by_tenant

    def offered(self, tenant: str) -> tuple[Sequence[CapabilityCard], int]:
        """The cards ``tenant`` may be offered (catalog order), and how many it may not."""
        if self._share is not None:
            share = self._share(tenant)
            return share, self._total - len(share)
        own = self._positions().get(tenant, [])
        positions = sorted(self._shared + own) if own else self._shared
        return [self.cards[i] for i in positions], len(self.cards) - len(positions)


def entitle(
    cards: Sequence[CapabilityCard] | TenantIndex, principal: Principal, config: PolicyConfig
) -> Entitlement:
    """Filter the catalog to the principal's tools. Deterministic; reads no query.

    Cards sharing (tenants, scopes, risk) share one decision, so a 100k-tool
    catalog costs one policy check per distinct access signature; given a
    :class:`TenantIndex`, only the cards offered to the principal's tenant are visited.
    """
    granted = config.effective_scopes(principal)
    memo: dict[tuple[tuple[str, ...], tuple[str, ...], bool], Decision] = {}
    allowed: list[CapabilityCard] = []
    denied: dict[Reason, int] = {}
    if isinstance(cards, TenantIndex):
        visit, elsewhere = cards.offered(principal.tenant)
        if elsewhere:
            denied[Reason.TENANT] = elsewhere
    else:
        visit = cards
    for card in visit:
        key = (card.tenants, card.scopes, card.risk in _PRIVILEGED)
        decision = memo.get(key)
        if decision is None:
            decision = memo[key] = decide_scopes(
                granted, principal.tenant, card, config.admin_scope
            )
        if decision.allowed:
            allowed.append(card)
        else:
            assert decision.reason is not None
            denied[decision.reason] = denied.get(decision.reason, 0) + 1
    by_id = {c.id: c for c in allowed}
    return Entitlement(tuple(allowed), denied, frozenset(by_id), by_id)
