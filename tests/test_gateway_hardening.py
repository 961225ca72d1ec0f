"""Regression tests for the hardening review's gateway findings (issue 8), end to end."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _gateway_kit import RecordingExecutor, gateway, spec, token
from support import CountingServer, counting_server
from toolscout.errors import ArgumentError, GatewayError, PolicyDenied, SchemaError
from toolscout.gateway.audit import AuditLog


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def refused(gw: Any, tok: str, tool_id: str, args: Any) -> GatewayError:
    async def go() -> GatewayError:
        with pytest.raises(GatewayError) as err:
            await gw.execute(tok, tool_id, args)
        return err.value

    return run(go())  # type: ignore[no-any-return]


def ok(gw: Any, tok: str, tool_id: str, args: Any) -> Any:
    return run(gw.execute(tok, tool_id, args))


INVOICE = spec(
    "billing.invoice",
    parameters={
        "type": "object",
        "properties": {
            "invoice": {"type": "string", "pattern": "^INV-[0-9]+$"},
            "count": {"type": "integer", "minimum": 1, "maximum": 10},
            "bonus_target_percent": {"type": "number", "minimum": 0, "maximum": 100},
            "nested": {"type": "object"},
        },
    },
)


def test_nan_and_infinity_never_reach_a_tool(tmp_path: Path) -> None:
    gw, ex, audit = gateway(tmp_path, [INVOICE])
    for bad in (float("nan"), float("inf"), float("-inf")):
        err = refused(gw, token(), "billing.invoice", {"bonus_target_percent": bad})
        assert isinstance(err, ArgumentError) and err.reason == "non_finite_number"
        err = refused(gw, token(), "billing.invoice", {"nested": {"deep": [bad]}})
        assert err.reason == "non_finite_number"
    assert isinstance(ex, RecordingExecutor) and ex.calls == []
    assert all(r.status == "refused" for r in audit.read()) and len(audit.read()) == 6


def test_pattern_dollar_and_strict_integer_at_the_gateway(tmp_path: Path) -> None:
    gw, ex, _ = gateway(tmp_path, [INVOICE])
    assert refused(gw, token(), "billing.invoice", {"invoice": "INV-1024\n"}).reason == (
        "schema_mismatch"
    )
    assert refused(gw, token(), "billing.invoice", {"count": 3.0}).reason == "schema_mismatch"
    ok(gw, token(), "billing.invoice", {"invoice": "INV-1024", "count": 3})
    assert isinstance(ex, RecordingExecutor)
    assert ex.calls == [("billing.invoice", {"invoice": "INV-1024", "count": 3})]
    assert isinstance(ex.calls[0][1]["count"], int)


def test_deeply_nested_arguments_are_an_argument_error(tmp_path: Path) -> None:
    gw, _, audit = gateway(tmp_path, [INVOICE])
    deep: Any = 1
    for _ in range(200_000):
        deep = {"a": deep}
    err = refused(gw, token(), "billing.invoice", {"nested": deep})
    assert isinstance(err, ArgumentError) and err.reason == "arguments_too_deep"
    assert audit.read()[-1].reason == "arguments_too_deep"


def test_lone_surrogates_in_a_tool_id_or_a_signed_sub_are_audited(tmp_path: Path) -> None:
    gw, _, audit = gateway(tmp_path, [INVOICE])
    err = refused(gw, token(), "billing.\ud800invoice", {})
    assert err.reason == "unknown_tool"
    ok(gw, token(sub="mal\udfffory"), "billing.invoice", {})
    records = audit.read()
    assert [r.status for r in records] == ["refused", "ok"] or records[-1].status == "ok"
    assert "\ufffd" in records[0].tool_id and "\ufffd" in records[-1].subject
    assert audit.verify().ok


@pytest.fixture
def internal_url() -> Iterator[tuple[str, type[CountingServer]]]:
    with counting_server() as served:
        yield served


def test_a_remote_ref_is_never_fetched_at_execution(
    tmp_path: Path, internal_url: tuple[str, type[CountingServer]]
) -> None:
    url, counter = internal_url
    # import refuses such a schema (cards.py); a spec that got past it (an older store,
    # a custom lookup) must still never make the gateway fetch anything
    remote = {"type": "object", "properties": {"q": {"$ref": url}}}
    ssrf = dataclasses.replace(spec("ssrf.tool", parameters={}), parameters=remote)
    gw, ex, audit = gateway(tmp_path, [ssrf])
    for _ in range(3):
        err = refused(gw, token(), "ssrf.tool", {"q": "x"})
        assert isinstance(err, SchemaError) and err.reason == "remote_ref"
    assert counter.hits == 0
    assert isinstance(ex, RecordingExecutor) and ex.calls == []
    assert {r.reason for r in audit.read()} == {"remote_ref"}


def test_an_audit_log_written_with_a_key_keys_argument_digests(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a.db", key="k" * 32)
    try:
        assert log.digest({"pin": "1234"}) != AuditLog(tmp_path / "b.db").digest({"pin": "1234"})
    finally:
        log.close()


# --------------------------------------------------------------------------- audit before execution


def test_the_attempt_is_audited_before_the_tool_runs(tmp_path: Path) -> None:
    seen: list[int] = []

    class Peeking(RecordingExecutor):
        async def call(self, spec: Any, arguments: Any) -> Any:
            seen.append(len(audit.read()))  # rows written before the tool ran
            return await super().call(spec, arguments)

    gw, _, audit = gateway(tmp_path, [INVOICE], Peeking())
    result = ok(gw, token(), "billing.invoice", {})
    assert seen == [1]
    attempt, outcome = audit.read()
    assert (attempt.kind, attempt.status, outcome.kind, outcome.ref) == (
        "attempt", "started", "outcome", attempt.id,
    )  # fmt: skip
    assert result.audit_id == outcome.id and audit.verify().ok


def test_a_write_locked_audit_log_refuses_the_call_and_runs_nothing(tmp_path: Path) -> None:
    import sqlite3

    from _gateway_kit import DictTools, verifier
    from toolscout.gateway.core import Gateway
    from toolscout.gateway.limits import Limits
    from toolscout.policy import PolicyConfig

    path = tmp_path / "tools.audit.db"
    audit = AuditLog(path, timeout_s=0.2)
    ex = RecordingExecutor()
    gw = Gateway(DictTools([INVOICE]), PolicyConfig(), verifier(), ex, audit, limits=Limits())
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # a long writer (an index run) holds the lock
    try:
        err = refused(gw, token(), "billing.invoice", {})
        assert err.reason == "audit_unavailable" and "not run" in str(err)
        assert ex.calls == []
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert ok(gw, token(), "billing.invoice", {}).ok
    assert len(ex.calls) == 1 and audit.verify().ok
    audit.close()


# --------------------------------------------------------------------------- slow sync tools


def test_slow_sync_calls_of_one_principal_do_not_starve_others(tmp_path: Path) -> None:
    from toolscout.executors.python import PythonExecutor
    from toolscout.gateway.limits import Limits

    release = threading.Event()
    ex = PythonExecutor(workers=8, max_queue=8)

    @ex.tool(id="slow.report")
    def slow_report() -> str:
        """Block until released."""
        release.wait(10)
        return "late"

    @ex.tool(id="fast.lookup")
    def fast_lookup() -> str:
        """Answer at once."""
        return "now"

    limits = Limits(rate_per_second=1000, burst=1000, max_in_flight_per_principal=4)
    gw, _, audit = gateway(tmp_path, ex.specs(), ex, timeout_s=0.3, limits=limits)
    greedy = token(sub="greedy", tenant="acme")

    async def flood() -> list[Any]:
        return await asyncio.gather(
            *(gw.execute(greedy, "slow.report", {}) for _ in range(40)), return_exceptions=True
        )

    async def scenario() -> tuple[list[Any], Any]:
        outcomes = await flood()
        other = await gw.execute(token(sub="bob", tenant="globex"), "fast.lookup", {})
        return outcomes, other

    try:
        outcomes, other = run(scenario())
        reasons = sorted(getattr(o, "reason", "ok") for o in outcomes)
        assert reasons.count("executor_timeout") == 4
        assert reasons.count("too_many_in_flight") == 36
        assert other.value == "now"  # another tenant's sync tool still runs
        timeouts = [r for r in audit.read(outcomes=True) if r.status == "timeout"]
        assert len(timeouts) == 4 and all(
            r.detail == "timed out; may still complete" for r in timeouts
        )
        # the 4 threads still run: greedy stays bounded until they end
        assert ex.pending == 4
        err = refused(gw, greedy, "fast.lookup", {})
        assert err.reason == "too_many_in_flight"
    finally:
        release.set()
    for _ in range(100):
        if ex.pending == 0:
            break
        time.sleep(0.02)
    assert ok(gw, greedy, "fast.lookup", {}).value == "now"


# --------------------------------------------------------------------------- patterns (issue 20)

EVIL = spec(
    "upstream.evil",
    tenants=["globex"],
    parameters={"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}},
)


def test_a_backtracking_pattern_neither_stalls_its_call_nor_another_callers(
    tmp_path: Path,
) -> None:
    gw, ex, _ = gateway(tmp_path, [EVIL, INVOICE])

    async def timed(start: float, tok: str, tool_id: str, args: Any) -> tuple[float, Any]:
        try:
            result: Any = await gw.execute(tok, tool_id, args)
        except GatewayError as exc:
            result = exc
        return time.perf_counter() - start, result

    async def go(n: int) -> tuple[tuple[float, Any], tuple[float, Any]]:
        # both start together; the times are each call's answer from that common start
        start = time.perf_counter()
        other = timed(start, token(), "billing.invoice", {"invoice": "INV-1"})
        evil = timed(start, token(tenant="globex"), "upstream.evil", {"s": "a" * n + "!"})
        both = await asyncio.gather(other, evil)
        return both[1], both[0]

    run(go(4))  # warm: the validators compiled, the audit open
    # 22 characters first: a backtracking engine needs ~1 s there (and years at 40);
    # RE2 answers in microseconds (the bound leaves room for a loaded machine)
    for n in (22, 40):
        (evil_s, evil), (other_s, other) = run(go(n))
        assert isinstance(evil, ArgumentError) and evil.reason == "schema_mismatch"
        assert evil_s < 0.25, (n, evil_s)
        assert other.value == {"ran": "billing.invoice"} and other_s < 0.25, (n, other_s)
    assert isinstance(ex, RecordingExecutor)
    assert {c[0] for c in ex.calls} == {"billing.invoice"}


# ------------------------------------------------------------------ order of checks (issue 20)

GLOBEX_ONLY = spec("globex.payroll", tenants=["globex"])


@pytest.mark.parametrize(
    "args",
    [
        {"order_id": float("nan")},
        {"order_id": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
        [],
    ],
)
def test_bad_arguments_to_another_tenants_tool_are_refused_by_the_policy(
    tmp_path: Path, args: Any
) -> None:
    """NaN, runaway nesting or a non-object for a tool of another tenant: the policy's
    refusal (as for an unknown tool), never an argument refusal naming the tool."""
    gw, ex, _ = gateway(tmp_path, [GLOBEX_ONLY])
    err = refused(gw, token(tenant="acme"), "globex.payroll", args)
    assert isinstance(err, PolicyDenied) and err.reason == "tenant_mismatch"
    unknown = refused(gw, token(tenant="acme"), "no.such_tool", args)
    assert isinstance(unknown, PolicyDenied) and unknown.reason == "unknown_tool"
    # the tenant's own caller is told what is wrong with its arguments
    own = refused(gw, token(tenant="globex"), "globex.payroll", args)
    assert isinstance(own, ArgumentError)
    assert isinstance(ex, RecordingExecutor) and ex.calls == []


def test_a_gateway_over_a_catalog_refuses_a_policy_copy(tmp_path: Path) -> None:
    from _gateway_kit import audit_log, verifier
    from support import embedder
    from toolscout.discovery.catalog import Catalog
    from toolscout.errors import ConfigError
    from toolscout.gateway.core import Gateway
    from toolscout.policy import PolicyConfig

    cat = Catalog.open(":memory:", embedder=embedder())
    audit = audit_log(tmp_path / "a.db")
    try:
        with pytest.raises(ConfigError, match="the catalog owns the policy"):
            Gateway(cat, PolicyConfig(), verifier(), RecordingExecutor(), audit)
        Gateway(cat, None, verifier(), RecordingExecutor(), audit)  # the catalog decides
    finally:
        cat.close()
