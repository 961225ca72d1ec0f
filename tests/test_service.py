"""Tests for toolscout.service: one object, one closed loop, one owner of catalog state."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from demo_fixture import demo_db_copy, indexed_demo  # noqa: F401  (fixture)
from support import card_embedder, embedder, spec
from toolscout import (
    DryRunExecutor,
    PolicyConfig,
    Principal,
    Settings,
    Toolscout,
    issue_token,
    read_catalog,
    read_policy,
)
from toolscout.cards import ToolSpec
from toolscout.discovery.inject import render
from toolscout.discovery.tokencount import count_json
from toolscout.errors import ConfigError, UnknownToolError
from toolscout.loader import demo_catalog_dir

KEY = "test-secret-key-for-the-service-suite-0123456789"
SUPPORT = Principal.of("alice", "acme", roles=["support_agent"])


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory, indexed_demo: Path) -> Path:  # noqa: F811
    """The whole demo catalog and its policy, indexed: a copy of the run's one
    (``demo_fixture.indexed_demo``, the same tools, policy and model), not indexed again."""
    return demo_db_copy(indexed_demo, tmp_path_factory.mktemp("svc"))


@pytest.fixture
def ts(demo_db: Path, tmp_path: Path) -> Iterator[Toolscout]:
    path = tmp_path / "demo.db"
    shutil.copy(demo_db, path)
    settings = Settings(db=path, jwt_key=KEY)
    with Toolscout.open(settings, embedder=embedder(), executors=DryRunExecutor()) as t:
        yield t


def token(sub: str = "alice", tenant: str = "acme", roles: tuple[str, ...] = ()) -> str:
    return issue_token(subject=sub, key=KEY, tenant=tenant, roles=roles)


@pytest.mark.parametrize("fmt", ["openai", "openai-responses", "anthropic", "gemini", "mcp"])
def test_the_name_the_model_saw_executes(ts: Toolscout, fmt: str) -> None:
    caller = token(roles=("support_agent",))
    shortlist = ts.discover(caller, "where is order 94218", fmt=fmt)
    schema = shortlist.schemas[0]
    name = schema["function"]["name"] if fmt == "openai" else schema["name"]
    assert name != shortlist.ids[0] or fmt == "mcp" or "." not in shortlist.ids[0]
    result = ts.execute(caller, name, {"order_id": "94218"})
    assert result.ok, result.to_dict()
    assert result.tool_id == shortlist.names[name] == "orders.find_order"
    assert result.value["tool"] == "orders.find_order"
    assert result.discovery_id == shortlist.discovery_id


def test_refusals_are_results_rendered_for_each_api(ts: Toolscout) -> None:
    caller = token(roles=("support_agent",))
    refused = ts.execute(caller, "billing_issue_full_refund", {"order_id": "5512"})
    assert (refused.status, refused.reason) == ("refused", "missing_scope")
    assert refused.audit_id > 0
    msg = refused.to_message("anthropic", call_id="toolu_1")
    block = msg["content"][0]
    assert block["is_error"] and "missing_scope" in block["content"]
    assert refused.to_message("openai", call_id="c1")["content"].startswith("refused:")
    assert refused.to_message("mcp")["isError"] is True
    bad = ts.execute(caller, "orders_find_order", {"order_id": "x"})
    assert (bad.status, bad.reason) == ("refused", "schema_mismatch")
    forged = ts.execute("not-a-token", "orders_find_order", {"order_id": "94218"})
    assert forged.status == "refused" and forged.reason.startswith("token_")


def test_other_tenants_tools_look_unknown(ts: Toolscout) -> None:
    ts.add([spec("globex.secret", tenants=["globex"], scopes=["orders:read"])])
    caller = token(roles=("support_agent",))
    forbidden = ts.execute(caller, "globex.secret", {})
    missing = ts.execute(caller, "globex.nothing", {})
    assert forbidden.reason == missing.reason == "unknown_tool"
    assert forbidden.message.replace("secret", "X") == missing.message.replace("nothing", "X")
    assert forbidden.tool_id is None
    # the audit keeps the real reason
    assert ts.audit.read()[-2].reason == "tenant_mismatch"
    with pytest.raises(UnknownToolError):
        ts.schema(caller, "globex.secret")
    with pytest.raises(UnknownToolError):
        ts.schema(caller, "billing.issue_full_refund")
    assert "input_schema" in ts.schema(caller, "orders_find_order", "anthropic")


def _reindex_elsewhere(db: Path, change: str) -> None:
    """Another process edits the catalog the long-lived service is using."""
    script = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from support import embedder
        from toolscout import Catalog, PolicyConfig
        cat = Catalog.open({str(db)!r}, embedder=embedder())
        if {change!r} == "tenant":
            import dataclasses
            spec = cat.get("orders.find_order")
            card = dataclasses.replace(spec.card, tenants=("globex",))
            cat.add([dataclasses.replace(spec, card=card)])
        else:
            roles = dict(cat.policy.roles)
            roles["support_agent"] = [s for s in roles["support_agent"] if s != "orders:read"]
            cat.set_policy(PolicyConfig(roles=roles, admin_scope=cat.policy.admin_scope))
        cat.close()
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)


@pytest.mark.parametrize(
    ("change", "reason"), [("tenant", "unknown_tool"), ("scope", "missing_scope")]
)
def test_a_change_made_by_another_process_is_seen_by_the_next_call(
    ts: Toolscout, change: str, reason: str
) -> None:
    caller = token(roles=("support_agent",))
    assert ts.execute(caller, "orders.find_order", {"order_id": "94218"}).ok
    assert "orders.find_order" in ts.discover(caller, "where is order 94218").ids
    _reindex_elsewhere(Path(str(ts.settings.db)), change)
    after = ts.execute(caller, "orders.find_order", {"order_id": "94218"})
    assert (after.status, after.reason) == ("refused", reason)
    assert "orders.find_order" not in ts.discover(caller, "where is order 94218").ids
    audited = ts.audit.read()[-1]
    assert audited.reason == ("tenant_mismatch" if change == "tenant" else "missing_scope")


def test_set_policy_is_seen_by_the_gateway_and_the_token_figures(ts: Toolscout) -> None:
    before = ts.discover(SUPPORT, "where is order 94218", fmt="openai")
    roles = dict(ts.catalog.policy.roles)
    roles["support_agent"] = ["orders:read"]
    ts.catalog.set_policy(PolicyConfig(roles=roles, admin_scope=ts.catalog.policy.admin_scope))
    after = ts.discover(SUPPORT, "where is order 94218", fmt="openai")
    entitled = [ts.catalog.get(c.id) for c in ts.catalog.entitle(SUPPORT).allowed]
    assert after.tokens.catalog == count_json(render(entitled, "openai", ts.catalog.names()))
    assert after.tokens.catalog < before.tokens.catalog
    assert after.tokens.injected == count_json(list(after.schemas))
    refused = ts.execute(SUPPORT, "customers_get_customer", {"customer_id": "c1"})
    assert refused.reason == "missing_scope"


def test_an_execution_the_discovery_did_not_surface_is_a_miss(ts: Toolscout) -> None:
    caller = token(roles=("support_agent",))
    shortlist = ts.discover(caller, "where is order 94218", conversation="conv-1")
    assert "orders.search_orders" in ts.catalog.names()
    other = next(t for t in ("orders.search_orders", "orders.get_return_status")
                 if t not in shortlist.ids)  # fmt: skip
    result = ts.execute(caller, other, {}, conversation="conv-1")
    assert result.discovery_id == shortlist.discovery_id
    log = ts.catalog.log
    assert log is not None
    misses = {fn.tool_id: fn for fn in log.false_negatives()}
    assert misses[other].misses == 1
    assert "where is order 94218" in misses[other].example_queries


def test_rendered_names_never_resolve_to_another_tool(tmp_path: Path) -> None:
    with Toolscout.open(tmp_path / "n.db", embedder=embedder(), executors=DryRunExecutor()) as ts:
        ts.add([spec("a.b", "Reads the b of a."), spec("a_b", "Writes the a b.")])
        names = ts.catalog.names()
        assert names["a_b"] == "a_b" and names["a.b"] != "a_b"
        root = Principal.of("root", scopes=["*"])
        assert ts.execute(root, "a_b", {}).value["tool"] == "a_b"
        assert ts.execute(root, names["a.b"], {}).value["tool"] == "a.b"
        rendered = ts.discover(root, "the b of a", fmt="openai", tier="progressive", k=2)
        assert set(rendered.names.values()) <= {"a.b", "a_b"}
        assert len(set(rendered.names)) == len(rendered.names)


def test_a_token_caller_needs_a_verifier(tmp_path: Path) -> None:
    with Toolscout.open(tmp_path / "v.db", embedder=embedder()) as ts:
        ts.add([spec("t.one")])
        result = ts.execute("some.token.value", "t.one", {})
        assert (result.status, result.reason) == ("refused", "token_verifier_missing")


def test_memory_store_serves_the_same_loop() -> None:
    from toolscout import MemoryStore

    store = MemoryStore()
    with Toolscout.open(Settings(db=":memory:"), store=store, embedder=card_embedder(),
                        executors=DryRunExecutor()) as ts:  # fmt: skip
        ts.add(read_catalog([demo_catalog_dir()]))
        ts.catalog.set_policy(read_policy(demo_catalog_dir() / "policy.yaml"))
        shortlist = ts.discover(SUPPORT, "where is order 94218", fmt="anthropic")
        assert shortlist.ids[0] == "orders.find_order"
        result = ts.execute(SUPPORT, shortlist.schemas[0]["name"], {"order_id": "94218"})
        assert result.ok and json.loads(result.content())["tool"] == "orders.find_order"


def test_query_log_none_keeps_no_query_text_anywhere(tmp_path: Path) -> None:
    db = tmp_path / "private.db"
    settings = Settings(db=db, query_log="none")
    with Toolscout.open(settings, embedder=embedder(), executors=DryRunExecutor()) as ts:
        ts.add([spec("shop.track_parcel", "Track a parcel by its tracking number.")])
        root = Principal.of("root", scopes=["*"])
        shortlist = ts.discover(root, "zanzibar marmalade parcel whereabouts", tier="progressive")
        ts.execute(root, "shop.track_parcel", {}, discovery_id=shortlist.discovery_id)
        assert ts.catalog.log is not None
        ts.catalog.log.flush()
    blobs = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert b"zanzibar" not in blobs and b"marmalade" not in blobs


def test_a_query_with_a_lone_surrogate_is_discovered_and_logged(ts: Toolscout) -> None:
    shortlist = ts.discover(SUPPORT, "where is order 94218 \ud800")
    assert "orders.find_order" in shortlist.ids
    assert "\ud800" not in shortlist.query
    log = ts.catalog.log
    assert log is not None
    log.flush()
    assert any(d.id == shortlist.discovery_id for d in log.discoveries())


class _Counting:
    """An executor that answers with its own mark and counts what it ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        self.ran.append(spec.id)
        return {"bound": True, "tool": spec.id}

    async def aclose(self) -> None:
        return None


def test_bind_runs_the_bound_tool_and_still_decides_who_may_call(ts: Toolscout) -> None:
    bound = _Counting()
    ts.bind(["orders.find_order", "billing.issue_full_refund"], bound)
    support = token(roles=("support_agent",))
    ran = ts.execute(support, "orders_find_order", {"order_id": "94218"})
    assert ran.ok and ran.value == {"bound": True, "tool": "orders.find_order"}
    # binding is not entitlement: the refund still needs its scope, and nothing ran
    refused = ts.execute(support, "billing_issue_full_refund", {"order_id": "5512"})
    assert (refused.status, refused.reason) == ("refused", "missing_scope")
    assert bound.ran == ["orders.find_order"]
    # tools not bound keep the executor they had
    other = ts.execute(support, "orders_search_orders", {"customer_email": "a@example.com"})
    assert other.ok and other.value["dry_run"] is True
    assert bound.ran == ["orders.find_order"]
    with pytest.raises(ConfigError, match="non-empty strings"):
        ts.bind(["orders.find_order", ""], bound)
    # a refused bind changed nothing
    assert ts.gateway.executors["orders.find_order"] is bound
