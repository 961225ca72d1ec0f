"""Catalog administration: one decision (policy.may_administer) for every surface, two
levels (tenant, platform), no wildcard ever granting either, every change audited."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fork_kit import toolscout as fork_toolscout
from serve_fixture import KEY, auth, token
from support import card_embedder, embedder, spec
from toolscout import Principal, Settings, Toolscout
from toolscout.errors import AdminDenied, ImportRefused
from toolscout.loader import demo_catalog_dir, read_catalog, read_policy
from toolscout.policy import (
    AdminAction,
    AdminLevel,
    PolicyConfig,
    Reason,
    admin_level,
    may_administer,
)

CFG = PolicyConfig(roles={"lead": ["orders:*", "toolscout:admin"], "owner": ["toolscout:platform"],
                          "star": ["*"]})  # fmt: skip

# -- the decision ------------------------------------------------------------------------
SEGMENTS = st.sampled_from(["*", "toolscout", "admin", "platform", "orders", "read", "x"])
PATTERNS = st.lists(SEGMENTS, min_size=1, max_size=3).map(":".join)


@settings(max_examples=400, deadline=None)
@given(
    scopes=st.sets(PATTERNS | st.text(max_size=12), max_size=6),
    tenant=st.sampled_from(["", "acme"]),
)
def test_no_scope_set_without_the_exact_scopes_administers_anything(
    scopes: set[str], tenant: str
) -> None:
    """Generated scope sets — wildcards of every shape included — never reach either level
    unless they hold the exact scope; an exact admin scope alone is never the platform."""
    scopes = {s for s in scopes if s not in ("toolscout:admin", "toolscout:platform")}
    who = Principal.of("p", tenant, scopes=scopes)
    assert admin_level(who, CFG) is AdminLevel.NONE
    for action in AdminAction:
        tenants = ("acme",) if action is AdminAction.CHANGE_TOOL else None
        decision = may_administer(who, CFG, action, tenants)
        assert not decision.allowed and decision.reason is Reason.NOT_ADMIN
    tenant_admin = Principal.of("p", tenant, scopes={*scopes, "toolscout:admin"})
    expected = AdminLevel.TENANT if tenant else AdminLevel.NONE
    assert admin_level(tenant_admin, CFG) is expected
    assert not may_administer(tenant_admin, CFG, AdminAction.FORCE).allowed


@pytest.mark.parametrize("wild", ["*", "toolscout:*", "*:admin", "*:*", "*:platform", "*:*:*"])
def test_wildcards_named_in_the_review_administer_nothing(wild: str) -> None:
    who = Principal.of("root", "acme", scopes=[wild])
    assert admin_level(who, CFG) is AdminLevel.NONE
    via_role = Principal.of("root", "acme", roles=["star"])
    assert admin_level(via_role, CFG) is AdminLevel.NONE


def test_a_tenant_administrator_changes_exactly_its_own_tenants_tools() -> None:
    lead = Principal.of("lee", "acme", roles=["lead"])
    change = AdminAction.CHANGE_TOOL
    assert may_administer(lead, CFG, change, ("acme",)).allowed
    assert may_administer(lead, CFG, change, ("acme", "acme")).allowed
    for tenants in [(), ("globex",), ("acme", "globex")]:
        d = may_administer(lead, CFG, change, tenants)
        assert not d.allowed and d.reason is Reason.OUTSIDE_TENANT
    for action in (AdminAction.REPLACE_ALL, AdminAction.REPLACE_POLICY, AdminAction.FORCE,
                   AdminAction.CATALOG):  # fmt: skip
        d = may_administer(lead, CFG, action)
        assert not d.allowed and d.reason is Reason.PLATFORM_REQUIRED
    owner = Principal.of("olivia", roles=["owner"])
    assert admin_level(owner, CFG) is AdminLevel.PLATFORM
    assert all(may_administer(owner, CFG, a, ()).allowed for a in AdminAction)


def test_the_policy_names_two_distinct_concrete_scopes() -> None:
    from toolscout.errors import ConfigError

    for bad in ({"platform_scope": "toolscout:*"}, {"platform_scope": "toolscout:admin"},
                {"platfrom_scope": "x:y"}):  # fmt: skip
        with pytest.raises(ConfigError):
            PolicyConfig.from_dict(bad)
    demo = read_policy(demo_catalog_dir() / "policy.yaml")
    assert demo.platform_scope == "toolscout:platform"
    levels = {
        role: admin_level(Principal.of("u", "acme", roles=[role]), demo) for role in demo.roles
    }
    assert levels["catalog_owner"] is AdminLevel.PLATFORM
    assert levels["support_lead"] is AdminLevel.TENANT
    assert levels["support_agent"] is AdminLevel.NONE


# -- the library ---------------------------------------------------------------------------
@pytest.fixture
def ts(tmp_path: Path) -> Iterator[Toolscout]:
    settings = Settings(db=str(tmp_path / "c.db"), jwt_key=KEY, audit_key=KEY)
    with Toolscout.open(settings, embedder=embedder(), policy=CFG) as service:
        service.add(
            [
                spec("acme.report", "Build the weekly acme report.", tenants=["acme"]),
                spec("globex.ledger", "Export the globex ledger.", tenants=["globex"]),
                spec("shared.ping", "Check that the service answers."),
            ]
        )
        yield service


def _admin_rows(ts: Toolscout) -> list[Any]:
    return [r for r in ts.audit.read() if r.kind == "admin"]


def test_a_tenant_administrator_is_bounded_to_its_tenant(ts: Toolscout) -> None:
    lead = Principal.of("lee", "acme", roles=["lead"])
    before = ts.catalog.get("globex.ledger").content_hash()
    # its own tenant's tool: changed, and the change audited before -> after
    old = ts.catalog.get("acme.report").content_hash()
    ts.import_tools(lead, [spec("acme.report", "Build the weekly report.", tenants=["acme"])])
    new = ts.catalog.get("acme.report").content_hash()
    assert any(r.tool_id == "acme.report" and r.args_digest == f"{old}->{new}"
               and r.subject == "lee" for r in _admin_rows(ts))  # fmt: skip
    refused = [
        [spec("acme.report", "Build it.", tenants=["acme", "globex"])],  # widen own tool
        [spec("globex.ledger", "Export it.", tenants=["acme"])],  # take another's
        [spec("globex.ledger", "Export it.", tenants=["globex"])],  # change another's
        [spec("shared.ping", "Ping.", tenants=["acme"])],  # claim an untenanted one
        [spec("acme.new", "New and untenanted.")],  # create an untenanted one
    ]
    for batch in refused:
        with pytest.raises(AdminDenied) as exc:
            ts.import_tools(lead, batch)
        assert exc.value.reason == Reason.OUTSIDE_TENANT.value
    with pytest.raises(AdminDenied, match="platform") as exc:
        ts.import_tools(lead, [spec("acme.report", "x", tenants=["acme"])], replace_all=True)
    with pytest.raises(AdminDenied, match="platform"):
        ts.import_tools(lead, [spec("acme.report", "x", tenants=["acme"])], force=True)
    with pytest.raises(AdminDenied, match="platform"):
        ts.replace_policy(lead, PolicyConfig(roles={"lead": ["*", "toolscout:platform"]}))
    # deleting another tenant's tool is answered as an unknown id would be
    with pytest.raises(AdminDenied) as foreign:
        ts.delete_tools(lead, ["globex.ledger"])
    with pytest.raises(AdminDenied) as unknown:
        ts.delete_tools(lead, ["globex.nothing"])
    assert foreign.value.reason == unknown.value.reason == "unknown_tool"
    assert str(foreign.value).replace("ledger", "X") == str(unknown.value).replace("nothing", "X")
    # nothing of the refused requests was stored; each refusal was audited with its reason
    assert ts.catalog.get("globex.ledger").content_hash() == before
    assert ts.catalog.spec("acme.new") is None and len(ts.catalog) == 3
    denied = [r for r in _admin_rows(ts) if r.decision == "denied"]
    assert {r.reason for r in denied} >= {"outside_own_tenant", "platform_admin_required"}
    assert any(r.tool_id == "globex.ledger" and r.reason == "outside_own_tenant" for r in denied)
    assert ts.audit.verify().ok
    assert ts.delete_tools(lead, ["acme.report"]) == 1


def test_wildcard_callers_administer_nothing_and_the_platform_does(ts: Toolscout) -> None:
    for scopes in (["*"], ["toolscout:*"], ["*:admin"], ["*:*"]):
        root = Principal.of("root", "acme", scopes=scopes)
        with pytest.raises(AdminDenied) as exc:
            ts.import_tools(root, [spec("acme.report", "x", tenants=["acme"])])
        assert exc.value.reason == Reason.NOT_ADMIN.value
        with pytest.raises(AdminDenied):
            ts.delete_tools(root, ["acme.report"])
    owner = Principal.of("olivia", roles=["owner"])
    ts.import_tools(owner, [spec("globex.ledger", "Export it.", tenants=["acme", "globex"])],
                    force=True)  # fmt: skip
    assert ts.catalog.get("globex.ledger").card.tenants == ("acme", "globex")
    assert ts.delete_tools(owner, ["shared.ping", "no.such"]) == 1
    rows = _admin_rows(ts)
    deleted = [r for r in rows if r.subject == "olivia" and r.tool_id == "shared.ping"]
    assert deleted and deleted[0].args_digest.endswith("->-")
    assert rows[-1].status == "applied"


def test_widening_without_force_is_refused_for_the_platform_too(ts: Toolscout) -> None:
    owner = Principal.of("olivia", roles=["owner"])
    with pytest.raises(ImportRefused):
        ts.import_tools(owner, [spec("globex.ledger", "Export.", tenants=["acme", "globex"])])
    assert ts.catalog.get("globex.ledger").card.tenants == ("globex",)
    assert _admin_rows(ts)[-1].reason == "import_refused"


# -- over HTTP: the review's attacks ------------------------------------------------------------
@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from toolscout.cli.serve import build_service
    from toolscout.http.app import create_app

    path = tmp_path_factory.mktemp("admin") / "demo.db"
    # built by the local operator, audited apart: the server keys its own audit log
    settings = Settings(db=str(path), audit_path=":memory:")
    with Toolscout.open(settings, embedder=card_embedder()) as ts:
        ts.catalog.set_policy(read_policy(demo_catalog_dir() / "policy.yaml"))
        ts.add(read_catalog([demo_catalog_dir() / f for f in ("database.yaml", "chat.yaml")]))
    service = build_service(str(path), jwt_key=KEY, dry_run=True)
    with TestClient(create_app(service), raise_server_exceptions=False) as c:
        yield c
    service.close()


def _record(client: Any, tool_id: str, headers: dict[str, str]) -> dict[str, Any]:
    r = client.get(f"/v1/tools/{tool_id}/schema?format=mcp", headers=headers)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_a_wildcard_token_cannot_disarm_a_destructive_tool_over_http(client: Any) -> None:
    star = auth(token("root@acme", scopes=["*"]))
    disarmed = {"id": "database.truncate_table", "name": "truncate_table", "risk": "read",
                "description": "Remove every row from a table.", "parameters": {}}  # fmt: skip
    for scopes in (["*"], ["toolscout:*"], ["*:admin"], ["*:*"]):
        headers = auth(token("root@acme", scopes=scopes))
        r = client.post("/v1/catalog/import", headers=headers,
                        json={"tools": [disarmed], "force": True})  # fmt: skip
        assert r.status_code == 403, r.text
    r = client.post("/v1/execute", headers=star,
                    json={"name": "database.truncate_table", "arguments": {}})  # fmt: skip
    assert r.json()["status"] == "refused"


def test_a_tenant_administrator_cannot_reach_another_tenant_over_http(client: Any) -> None:
    lead = auth(token("lee@acme", roles=["support_lead"]))
    widened = {"id": "chat.globex_bridge_teams_channel", "name": "bridge_teams_channel",
               "description": "Bridge a channel.", "tenants": ["acme", "globex"]}  # fmt: skip
    r = client.post("/v1/catalog/import", headers=lead, json={"tools": [widened], "force": True})
    assert r.status_code == 403 and "platform" in r.json()["error"]["message"]
    r = client.post("/v1/catalog/import", headers=lead, json={"tools": [widened]})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    r = client.post("/v1/catalog/delete", headers=lead,
                    json={"ids": ["chat.globex_bridge_teams_channel"]})  # fmt: skip
    assert r.status_code == 404
    own = {"id": "database.acme_refresh_reporting_warehouse", "name": "refresh_warehouse",
           "description": "Refresh the acme reporting warehouse.", "tenants": ["acme"]}  # fmt: skip
    r = client.post("/v1/catalog/import", headers=lead, json={"tools": [own], "replace_all": True})
    assert r.status_code == 403
    # the globex caller still sees its tool, and acme's cannot use it
    globex = auth(token("gus@globex", tenant="globex", roles=["workspace_admin"]))
    assert _record(client, "chat.globex_bridge_teams_channel", globex)
    r = client.post("/v1/execute", headers=auth(token("lee@acme", roles=["workspace_admin"])),
                    json={"name": "chat.globex_bridge_teams_channel", "arguments": {}})  # fmt: skip
    assert r.json()["reason"] == "unknown_tool"
    owner = auth(token("olivia", tenant="", roles=["catalog_owner"]))
    r = client.post("/v1/catalog/import", headers=owner, json={"tools": [own], "force": True})
    assert r.status_code == 200, r.text


# -- the CLI -------------------------------------------------------------------------------------
def test_cli_index_with_a_token_is_bounded_and_audited(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    tools = tmp_path / "tools.jsonl"
    rows = [{"id": "globex.ledger", "name": "ledger", "description": "Export the ledger.",
             "parameters": {}, "tenants": ["globex"]}]  # fmt: skip
    tools.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    policy = tmp_path / "policy.yaml"
    policy.write_text(json.dumps(CFG.to_dict()))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        # forked with the imports done (fork_kit): what the command does, not how it starts
        cmd = fork_toolscout("index", str(tools), "--db", str(db), *args)
        env = {"TOOLSCOUT_TOKEN_KEY": KEY, "PATH": "/usr/bin:/bin"}
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)

    assert run("--policy", str(policy)).returncode == 0  # the local operator
    rows[0]["tenants"] = ["acme", "globex"]
    tools.write_text(json.dumps(rows[0]) + "\n")
    lead = token("lee@acme", roles=["lead"])
    done = run("--token", lead, "--force")
    assert done.returncode == 2 and "platform" in done.stderr, done.stderr
    done = run("--token", lead)
    assert done.returncode == 2 and "tenant administrator" in done.stderr, done.stderr
    done = run("--token", token("olivia", tenant="", roles=["owner"]), "--force")
    assert done.returncode == 0, done.stderr
    from toolscout.gateway.audit import AuditLog

    with AuditLog(tmp_path / "cli.audit.db") as log:
        admin = [r for r in log.read() if r.kind == "admin"]
    assert [r.subject for r in admin if r.decision == "denied"] == ["lee@acme", "lee@acme"]
    assert any(r.subject == "olivia" and r.tool_id == "globex.ledger" for r in admin)
    assert any(r.subject.startswith("local:") for r in admin)
