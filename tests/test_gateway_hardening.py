"""Regression tests for the hardening review's gateway findings (issue 8), end to end."""

from __future__ import annotations

import asyncio
import dataclasses
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _gateway_kit import RecordingExecutor, gateway, spec, token
from toolscout.errors import ArgumentError, GatewayError, SchemaError
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


class _Counter(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def internal_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/internal"
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_ref_is_never_fetched_at_execution(tmp_path: Path, internal_url: str) -> None:
    _Counter.hits = 0
    # import refuses such a schema (cards.py); a spec that got past it (an older store,
    # a custom lookup) must still never make the gateway fetch anything
    remote = {"type": "object", "properties": {"q": {"$ref": internal_url}}}
    ssrf = dataclasses.replace(spec("ssrf.tool", parameters={}), parameters=remote)
    gw, ex, audit = gateway(tmp_path, [ssrf])
    for _ in range(3):
        err = refused(gw, token(), "ssrf.tool", {"q": "x"})
        assert isinstance(err, SchemaError) and err.reason == "remote_ref"
    assert _Counter.hits == 0
    assert isinstance(ex, RecordingExecutor) and ex.calls == []
    assert {r.reason for r in audit.read()} == {"remote_ref"}


def test_an_audit_log_written_with_a_key_keys_argument_digests(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a.db", key="k" * 32)
    try:
        assert log.digest({"pin": "1234"}) != AuditLog(tmp_path / "b.db").digest({"pin": "1234"})
    finally:
        log.close()
