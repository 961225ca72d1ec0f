from __future__ import annotations

import pytest

from support import spec
from toolscout.errors import ConfigError
from toolscout.policy import PolicyConfig, Principal, Reason, decide, entitle, holds

CFG = PolicyConfig(roles={"support": ["orders:read"], "admin": ["billing:*", "toolscout:admin"]})


@pytest.mark.parametrize(
    ("granted", "scope", "ok"),
    [
        ({"billing:*"}, "billing:write", True),
        ({"billing:*"}, "billing:refund:full", True),
        ({"billing:*"}, "billing", False),
        ({"billing:*"}, "billingx:write", False),
        ({"*"}, "anything:at:all", True),
        ({"*:read"}, "orders:read", True),
        ({"*:read"}, "orders:write", False),
        ({"orders:read"}, "orders:read", True),
        ({"orders:read"}, "orders:write", False),
    ],
)
def test_scope_patterns(granted: set[str], scope: str, ok: bool) -> None:
    assert holds(frozenset(granted), scope) is ok


def test_decide_reasons() -> None:
    read = spec("orders.find", scopes=["orders:read"]).card
    tenant_only = spec("orders.acme", scopes=["orders:read"], tenants=["acme"]).card
    refund = spec("billing.full_refund", scopes=["billing:admin"], risk="admin").card
    agent = Principal.of("a", "globex", roles=["support"])
    assert decide(agent, read, CFG).allowed
    assert decide(agent, tenant_only, CFG).reason is Reason.TENANT
    assert decide(agent, refund, CFG).reason is Reason.MISSING_SCOPE
    assert decide(agent, None, CFG).reason is Reason.UNKNOWN_TOOL
    # every scope by wildcard, but no explicit admin scope: still refused
    star = Principal.of("s", "acme", scopes=["*"])
    d = decide(star, refund, CFG)
    assert d.reason is Reason.ADMIN_REQUIRED and "toolscout:admin" in d.detail
    assert decide(Principal.of("b", "acme", roles=["admin"]), refund, CFG).allowed


def test_unknown_roles_grant_nothing() -> None:
    read = spec("orders.find", scopes=["orders:read"]).card
    assert not decide(Principal.of("x", roles=["root"]), read, CFG).allowed


def test_entitle_counts_reasons_and_keeps_order() -> None:
    cards = [
        spec("t.open").card,
        spec("t.read", scopes=["orders:read"]).card,
        spec("t.write", scopes=["orders:write"]).card,
        spec("t.admin", scopes=["orders:read"], risk="destructive").card,
        spec("t.acme", tenants=["acme"]).card,
    ]
    ent = entitle(cards, Principal.of("a", "globex", roles=["support"]), CFG)
    assert [c.id for c in ent.allowed] == ["t.open", "t.read"]
    assert ent.ids == frozenset({"t.open", "t.read"})
    assert ent.denied == {Reason.MISSING_SCOPE: 1, Reason.ADMIN_REQUIRED: 1, Reason.TENANT: 1}
    assert ent.filtered == 3


@pytest.mark.parametrize(
    "data",
    [
        {"roles": ["a"]},
        {"roles": {"a": "orders:read"}},
        {"admin_scope": "admin:*"},
        {"admin_scope": ""},
    ],
)
def test_bad_policy_config(data: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        PolicyConfig.from_dict(data)


def test_a_card_requiring_the_admin_scope_by_name_is_not_granted_by_a_wildcard() -> None:
    card = spec("ops.rotate_keys", scopes=["toolscout:admin"]).card  # risk left at its default
    for scopes in (["*"], ["toolscout:*"], ["*:admin"]):
        decision = decide(Principal.of("s", "acme", scopes=scopes), card, CFG)
        assert not decision.allowed and decision.reason is Reason.MISSING_SCOPE
    assert decide(Principal.of("s", "acme", scopes=["toolscout:admin"]), card, CFG).allowed
    assert decide(Principal.of("s", "acme", roles=["admin"]), card, CFG).allowed


def test_the_tenant_index_entitles_exactly_what_a_pass_over_every_card_does() -> None:
    """Visiting only a tenant's share of the catalog changes nothing: same cards, same
    order, same refusal counts, for every tenant, none, and one the catalog never saw."""
    import random

    from toolscout.policy import TenantIndex

    rng = random.Random(7)
    tenants = ["acme", "globex", "initech", ""]
    scopes = ["orders:read", "orders:write", "billing:admin", "crm:read"]
    cards = []
    for i in range(400):
        offered = rng.sample(tenants[:3], rng.choice([0, 0, 1, 1, 2]))
        risk = rng.choice(["read", "read", "write", "admin"])
        cards.append(
            spec(
                f"t{i}",
                scopes=rng.sample(scopes, rng.choice([0, 1, 2])),
                tenants=offered,
                risk=risk,
            ).card
        )
    index = TenantIndex(cards)
    for tenant in [*tenants, "unknown"]:
        for who in (
            Principal.of("a", tenant, roles=["support"]),
            Principal.of("b", tenant, scopes=["*"]),
            Principal.of("c", tenant, scopes=["*", "toolscout:admin"]),
        ):
            plain, fast = entitle(cards, who, CFG), entitle(index, who, CFG)
            assert [c.id for c in fast.allowed] == [c.id for c in plain.allowed]
            assert dict(fast.denied) == dict(plain.denied) and fast.ids == plain.ids
            assert fast.filtered + len(fast.allowed) == len(cards)
