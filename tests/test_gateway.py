"""Tests for toolscout.gateway.core: every check in order, an audit record for each attempt."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from _gateway_kit import (
    DictTools,
    RecordingExecutor,
    audit_log,
    expired_token,
    gateway,
    signer,
    spec,
    token,
    verifier,
)
from toolscout.cards import ToolSpec
from toolscout.errors import (
    ArgumentError,
    ConfigError,
    ExecutorError,
    ExecutorTimeout,
    GatewayError,
    GrantError,
    PolicyDenied,
    RateLimited,
    TokenError,
)
from toolscout.executors.base import PythonExecutor, tool
from toolscout.gateway.core import ExecutionResult, Gateway, ToolLookup
from toolscout.gateway.limits import Limits
from toolscout.policy import PolicyConfig

ADMIN = "toolscout:admin"
CATALOG = [
    spec("billing.invoice.get", scopes=["billing:read"]),
    spec("billing.refund.partial", scopes=["billing:refund"], risk="write"),
    spec("billing.refund.full", scopes=["billing:refund"], risk="admin"),
    spec("acme.only", tenants=["acme"]),
    spec("crm.lookup"),
]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def refusal(gw: Gateway, tok: str, tool_id: str, args: Any, **kw: Any) -> GatewayError:
    with pytest.raises(GatewayError) as err:
        run(gw.execute(tok, tool_id, args, **kw))
    return err.value


def test_allowed_call_runs_and_is_audited(tmp_path: Path) -> None:
    gw, ex, audit = gateway(tmp_path, CATALOG)
    assert isinstance(gw.tools, ToolLookup)
    result = run(
        gw.execute(token(scopes=["billing:read"]), "billing.invoice.get", {"order_id": "o1"})
    )
    assert isinstance(result, ExecutionResult)
    assert result.value == {"ran": "billing.invoice.get"}
    assert result.principal.subject == "alice"
    assert 0 <= result.overhead_ms <= result.latency_ms
    assert isinstance(ex, RecordingExecutor)
    assert ex.calls == [("billing.invoice.get", {"order_id": "o1"})]
    (rec,) = audit.read(outcomes=True)
    assert (rec.subject, rec.tenant, rec.tool_id, rec.decision, rec.reason, rec.status) == (
        "alice", "acme", "billing.invoice.get", "allowed", "ok", "ok",
    )  # fmt: skip
    assert rec.id == result.audit_id
    assert len(rec.args_digest) == 64


@pytest.mark.parametrize(
    ("tool_id", "scopes", "tenant", "error", "reason"),
    [
        ("no.such.tool", ["*"], "acme", PolicyDenied, "unknown_tool"),
        ("acme.only", [], "globex", PolicyDenied, "tenant_mismatch"),
        ("billing.invoice.get", ["crm:read"], "acme", PolicyDenied, "missing_scope"),
        ("billing.refund.full", ["billing:refund"], "acme", PolicyDenied, "admin_scope_required"),
        ("billing.refund.full", ["billing:*", "*"], "acme", PolicyDenied, "admin_scope_required"),
    ],
)
def test_policy_refusals(
    tmp_path: Path, tool_id: str, scopes: list[str], tenant: str, error: type, reason: str
) -> None:
    gw, ex, audit = gateway(tmp_path, CATALOG)
    err = refusal(gw, token(scopes=scopes, tenant=tenant), tool_id, {"order_id": "o"})
    assert type(err) is error and err.reason == reason and err.tool_id == tool_id
    assert isinstance(ex, RecordingExecutor) and ex.calls == []
    (rec,) = audit.read()
    assert (rec.decision, rec.reason, rec.status, rec.subject) == (
        "denied",
        reason,
        "refused",
        "alice",
    )


def test_admin_tool_with_admin_scope_and_via_role(tmp_path: Path) -> None:
    policy = PolicyConfig(roles={"billing-admin": ["billing:refund", ADMIN]})
    gw, ex, _ = gateway(tmp_path, CATALOG, policy=policy)
    run(
        gw.execute(
            token(scopes=["billing:refund", ADMIN]), "billing.refund.full", {"order_id": "o"}
        )
    )
    run(gw.execute(token(roles=["billing-admin"]), "billing.refund.full", {"order_id": "o"}))
    err = refusal(gw, token(roles=["support"]), "billing.refund.full", {"order_id": "o"})
    assert err.reason == "missing_scope"
    assert isinstance(ex, RecordingExecutor) and len(ex.calls) == 2


@pytest.mark.parametrize(
    ("tok", "reason"),
    [("", "token_missing"), ("not-a-jwt", "token_malformed")],
)
def test_token_refusals_are_audited_without_a_subject(
    tmp_path: Path, tok: str, reason: str
) -> None:
    gw, _, audit = gateway(tmp_path, CATALOG)
    err = refusal(gw, tok, "crm.lookup", {"order_id": "o"})
    assert isinstance(err, TokenError) and err.reason == reason
    (rec,) = audit.read()
    assert (rec.subject, rec.decision, rec.reason) == ("", "denied", reason)


def test_expired_token(tmp_path: Path) -> None:
    gw, _, audit = gateway(tmp_path, CATALOG)
    err = refusal(gw, expired_token(scopes=["*"]), "crm.lookup", {"order_id": "o"})
    assert err.reason == "token_expired"
    assert audit.read()[0].reason == "token_expired"


def test_the_token_and_policy_come_before_the_size_limit(tmp_path: Path) -> None:
    """An argument refusal names the tool: only a caller who may use it gets one."""
    gw, _, audit = gateway(tmp_path, CATALOG, limits=Limits(max_argument_bytes=100))
    err = refusal(gw, "forged", "crm.lookup", {"order_id": "x" * 200})
    assert isinstance(err, TokenError)
    assert audit.read()[0].subject == ""
    err = refusal(gw, token(scopes=["*"]), "crm.lookup", {"order_id": "x" * 200})
    assert isinstance(err, ArgumentError) and err.reason == "arguments_too_large"


def test_rate_limit(tmp_path: Path) -> None:
    gw, _, audit = gateway(tmp_path, CATALOG, limits=Limits(rate_per_second=0.001, burst=2))
    tok = token()
    run(gw.execute(tok, "crm.lookup", {"order_id": "o"}))
    run(gw.execute(tok, "crm.lookup", {"order_id": "o"}))
    err = refusal(gw, tok, "crm.lookup", {"order_id": "o"})
    assert isinstance(err, RateLimited) and err.reason == "rate_limited"
    run(gw.execute(token(sub="bob"), "crm.lookup", {"order_id": "o"}))
    assert [r.decision for r in audit.read(outcomes=True)] == [
        "allowed",
        "allowed",
        "denied",
        "allowed",
    ]


def test_unknown_parameter_names_it_and_lists_the_valid_ones(tmp_path: Path) -> None:
    gw, ex, audit = gateway(tmp_path, CATALOG)
    err = refusal(gw, token(), "crm.lookup", {"order_id": "o", "refund_all": True})
    assert isinstance(err, ArgumentError) and err.reason == "unknown_parameter"
    assert "'refund_all'" in str(err) and "amount, order_id" in str(err)
    assert isinstance(ex, RecordingExecutor) and ex.calls == []
    assert audit.read()[0].reason == "unknown_parameter"


def test_schema_mismatch_message(tmp_path: Path) -> None:
    gw, _, _ = gateway(tmp_path, CATALOG)
    err = refusal(gw, token(), "crm.lookup", {"amount": "ten"})
    assert err.reason == "schema_mismatch"
    assert "'order_id' is a required property" in str(err)
    assert "amount: 'ten' is not of type 'number'" in str(err)


@pytest.mark.parametrize("args", [[1, 2], "order_id=1", None, {"x": {1, 2}}])
def test_arguments_must_be_a_json_object(tmp_path: Path, args: Any) -> None:
    gw, _, _ = gateway(tmp_path, CATALOG)
    err = refusal(gw, token(), "crm.lookup", args)
    assert err.reason in ("arguments_not_object", "arguments_not_json")


def test_open_schemas_and_allow_unknown_params(tmp_path: Path) -> None:
    open_spec = spec(
        "open", parameters={"type": "object", "properties": {}, "additionalProperties": True}
    )
    empty = spec("empty", parameters={})
    gw, _, _ = gateway(tmp_path, [open_spec, empty])
    run(gw.execute(token(), "open", {"anything": 1}))
    run(gw.execute(token(), "empty", {}))
    err = refusal(gw, token(), "empty", {"x": 1})
    assert "takes no parameters" in str(err)
    gw2, _, _ = gateway(tmp_path / "2", CATALOG, allow_unknown_params=True)
    run(gw2.execute(token(), "crm.lookup", {"order_id": "o", "extra": 1}))


def test_schema_draft_and_refs(tmp_path: Path) -> None:
    draft7 = spec(
        "d7",
        parameters={
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "definitions": {"id": {"type": "string", "pattern": "^o_"}},
            "allOf": [{"$ref": "#/definitions/base"}],
            "properties": {"order_id": {"$ref": "#/definitions/id"}},
        }
        | {"definitions": {"id": {"type": "string", "pattern": "^o_"},
                           "base": {"properties": {"note": {"type": "string"}}}}},
    )  # fmt: skip
    gw, _, _ = gateway(tmp_path, [draft7])
    run(gw.execute(token(), "d7", {"order_id": "o_1", "note": "n"}))
    assert refusal(gw, token(), "d7", {"order_id": "x"}).reason == "schema_mismatch"
    assert refusal(gw, token(), "d7", {"nope": 1}).reason == "unknown_parameter"


def test_validators_are_cached_per_content(tmp_path: Path) -> None:
    gw, _, _ = gateway(tmp_path, CATALOG)
    s = CATALOG[-1]
    assert gw.validator._compiled(s) is gw.validator._compiled(s)
    same = spec("crm.lookup")
    assert gw.validator._compiled(same) is gw.validator._compiled(s)
    changed = spec("crm.lookup", parameters={"type": "object", "properties": {"q": {}}})
    assert gw.validator._compiled(changed).known == frozenset({"q"})


def test_strict_mode_needs_a_grant_covering_the_tool(tmp_path: Path) -> None:
    sg = signer()
    gw, ex, audit = gateway(tmp_path, CATALOG, grants=sg, strict=True)
    tok = token(scopes=["billing:read"])
    principal = verifier().verify(tok)
    err = refusal(gw, tok, "crm.lookup", {"order_id": "o"})
    assert isinstance(err, GrantError) and err.reason == "grant_missing"
    grant = sg.issue(principal, ["billing.invoice.get"])
    err = refusal(gw, tok, "crm.lookup", {"order_id": "o"}, grant=grant)
    assert err.reason == "grant_tool_not_covered"
    run(gw.execute(tok, "billing.invoice.get", {"order_id": "o"}, grant=grant))
    other = sg.issue(verifier().verify(token(sub="bob")), ["crm.lookup"])
    assert refusal(gw, tok, "crm.lookup", {"order_id": "o"}, grant=other).reason == (
        "grant_subject_mismatch"
    )
    # policy is still checked before the grant: a grant never widens entitlement
    grant_all = sg.issue(principal, [s.id for s in CATALOG])
    err = refusal(gw, tok, "billing.refund.full", {"order_id": "o"}, grant=grant_all)
    assert err.reason == "missing_scope"
    assert isinstance(ex, RecordingExecutor) and len(ex.calls) == 1
    assert [r.decision for r in audit.read(outcomes=True)].count("allowed") == 1


def test_non_strict_ignores_grants_and_strict_needs_a_signer(tmp_path: Path) -> None:
    gw, _, _ = gateway(tmp_path, CATALOG, grants=signer())
    run(gw.execute(token(), "crm.lookup", {"order_id": "o"}, grant="garbage"))
    with pytest.raises(ConfigError):
        gateway(tmp_path, CATALOG, strict=True)


class Slow:
    def __init__(self) -> None:
        self.finished: list[str] = []

    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        await asyncio.sleep(5 if spec.id == "slow" else 0.01)
        self.finished.append(spec.id)
        return spec.id

    async def aclose(self) -> None:
        return None


def test_timeout_is_typed_and_does_not_block_other_calls(tmp_path: Path) -> None:
    ex = Slow()
    gw, _, audit = gateway(tmp_path, [spec("slow"), spec("fast")], ex, timeout_s=0.3)

    async def both() -> list[Any]:
        return await asyncio.gather(
            gw.execute(token(), "slow", {"order_id": "o"}),
            gw.execute(token(), "fast", {"order_id": "o"}),
            return_exceptions=True,
        )

    slow, fast = run(both())
    assert isinstance(slow, ExecutorTimeout) and slow.reason == "executor_timeout"
    assert isinstance(fast, ExecutionResult) and fast.value == "fast"
    assert ex.finished == ["fast"]
    by_tool = {r.tool_id: r for r in audit.read()}
    assert (by_tool["slow"].decision, by_tool["slow"].status) == ("error", "timeout")
    assert by_tool["slow"].latency_ms >= 300
    assert by_tool["fast"].status == "ok"


class Broken:
    async def call(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> Any:
        raise RuntimeError("disk on fire")

    async def aclose(self) -> None:
        return None


def test_executor_failures_are_typed_and_audited(tmp_path: Path) -> None:
    gw, _, audit = gateway(tmp_path, [spec("a"), spec("b")], executor=None)
    gw.executors = {"a": Broken()}
    err = refusal(gw, token(), "a", {"order_id": "o"})
    assert isinstance(err, ExecutorError) and err.reason == "executor_exception"
    err = refusal(gw, token(), "b", {"order_id": "o"})
    assert isinstance(err, ExecutorError) and err.reason == "no_executor"
    assert [(r.decision, r.status) for r in audit.read(outcomes=True)] == [
        ("error", "error"),
        ("error", "error"),
    ]


def test_executor_mapping_with_default(tmp_path: Path) -> None:
    special, default = RecordingExecutor(), RecordingExecutor()
    audit = audit_log(tmp_path / "a.db")
    gw = Gateway(
        DictTools(CATALOG), PolicyConfig(), verifier(),
        {"crm.lookup": special, "*": default}, audit,
    )  # fmt: skip
    run(gw.execute(token(scopes=["billing:read"]), "crm.lookup", {"order_id": "o"}))
    run(gw.execute(token(scopes=["billing:read"]), "billing.invoice.get", {"order_id": "o"}))
    assert [c[0] for c in special.calls] == ["crm.lookup"]
    assert [c[0] for c in default.calls] == ["billing.invoice.get"]


def test_python_tools_end_to_end_sync_wrapper(tmp_path: Path) -> None:
    @tool(id="math.add", scopes=["math:use"])
    def add(a: int, b: int = 2) -> int:
        """Add two integers."""
        return a + b

    @tool(id="math.fail")
    async def fail() -> None:
        """Always fails."""
        raise ValueError("nope")

    ex = PythonExecutor([add, fail])
    gw, _, audit = gateway(tmp_path, ex.specs(), ex)
    tok = token(scopes=["math:use"])
    try:
        assert gw.execute_sync(tok, "math.add", {"a": 40}).value == 42
        with pytest.raises(ArgumentError, match="'c'"):
            gw.execute_sync(tok, "math.add", {"a": 1, "c": 3})
        with pytest.raises(ArgumentError, match="'a' is a required property"):
            gw.execute_sync(tok, "math.add", {})
        with pytest.raises(ExecutorError, match="the tool failed") as err:
            gw.execute_sync(tok, "math.fail", {})
        assert err.value.reason == "tool_failed"
        # the exception text is for the audit, never the caller
        assert "nope" not in str(err.value) and "ValueError: nope" in err.value.detail
        with pytest.raises(PolicyDenied):
            gw.execute_sync(token(), "math.add", {"a": 1})
    finally:
        gw.close()
    assert [r.decision for r in audit.read(outcomes=True)] == [
        "allowed",
        "denied",
        "denied",
        "error",
        "denied",
    ]
    assert audit.verify().ok


def test_authorize_runs_the_checks_without_executing(tmp_path: Path) -> None:
    gw, ex, audit = gateway(tmp_path, CATALOG)
    principal, s, digest = gw.authorize(token(), "crm.lookup", {"order_id": "o"})
    assert (principal.subject, s.id, len(digest)) == ("alice", "crm.lookup", 64)
    with pytest.raises(PolicyDenied):
        gw.authorize(token(), "billing.invoice.get", {"order_id": "o"})
    assert isinstance(ex, RecordingExecutor) and ex.calls == []
    assert audit.read() == []


def test_long_tool_ids_are_unknown_without_lookup(tmp_path: Path) -> None:
    class Counting(DictTools):
        lookups = 0

        def spec(self, tool_id: str) -> ToolSpec | None:
            Counting.lookups += 1
            return super().spec(tool_id)

    audit = audit_log(tmp_path / "a.db")
    gw = Gateway(Counting(CATALOG), PolicyConfig(), verifier(), RecordingExecutor(), audit)
    err = refusal(gw, token(scopes=["*"]), "x" * 1000, {})
    assert err.reason == "unknown_tool" and Counting.lookups == 0
    assert len(audit.read()[0].tool_id) == 256


def test_bad_configuration(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        gateway(tmp_path, CATALOG, timeout_s=0)


def test_a_faulty_lookup_fails_closed_and_is_audited(tmp_path: Path) -> None:
    class Faulty:
        def spec(self, tool_id: str) -> ToolSpec | None:
            raise OSError("catalog unavailable")

    ex = RecordingExecutor()
    audit = audit_log(tmp_path / "a.db")
    gw = Gateway(Faulty(), PolicyConfig(), verifier(), ex, audit)
    with pytest.raises(OSError):
        run(gw.execute(token(), "crm.lookup", {}))
    assert ex.calls == []
    (rec,) = audit.read()
    assert (rec.decision, rec.reason, rec.status) == ("denied", "internal_error", "error")
