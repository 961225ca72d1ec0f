"""A forwarded call's per-call work trimmed without changing what it checks or answers
(round seventeen, h/fwd11).

* the fast path's answer line is pydantic's serializer on a plain dict: the bytes of the
  SDK's ``JSONRPCResponse(...).model_dump_json(...)``, without building the model;
* the ``serverInfo`` stamp of the answer is not deep-copied per call (it is encoded at
  once and never kept), and the result is shaped by the SDK's own serializer;
* a call's connection is made again only when its envelope changed, or when the last call
  left state on it (and two calls in flight never share one);
* a caller whose client declared none of the capabilities an upstream may ask for runs its
  call in the request's own task (no round: it can never be asked); a caller that declared
  one still gets its round, freed when the call ends;
* ``Link.detached`` is ``dataclasses.replace`` with the request's parts dropped;
* the SDK's compile of a tool's output schema is asked once per schema object, and an
  invalid schema is still the SDK's to refuse every time;
* the audit chain is unchanged (a row's hash over a tuple is its hash over a list).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.server.lowlevel.server import Server
from mcp.server.runner import ServerRunner
from mcp.types import (
    CallToolResult,
    JSONRPCResponse,
    TextContent,
)
from mcp_types import methods

from _mcp_kit import capable_link
from toolscout.gateway.audit import AuditLog
from toolscout.gateway.audit_rows import _row_hash
from toolscout.mcp import lean
from toolscout.mcp.fastcall import FastCalls, _plain_call, response_line
from toolscout.mcp.relay import Link
from toolscout.mcp.rounds import Rounds

VERSION = "2026-07-28"
STAMP_KEY = "io.modelcontextprotocol/serverInfo"


def _line(rid: Any, text: str = "ping", client: str = "mcp") -> str:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "0.1.0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": "echo", "arguments": {"text": text}, "_meta": meta}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


# -- the answer line -------------------------------------------------------------------


RESULTS = [
    {"content": [{"type": "text", "text": "plain"}], "isError": False},
    {
        "content": [{"type": "text", "text": 'héllo \u2028 😀 "q" \\ </script>'}],
        "structuredContent": {
            "f": 1.0,
            "g": 1e20,
            "h": 1.5e-7,
            "big": 2**70,
            "none": None,
            "nan": float("nan"),
            "inf": float("-inf"),
            "neg": -0.0,
            "flag": True,
            "nested": [{"a": [1, 2.5, "x"]}],
        },
        "isError": False,
    },
    {"content": [], "isError": True, "_meta": {"k": "v"}},
]


@pytest.mark.parametrize("rid", [3, "req-7", 2**40])
@pytest.mark.parametrize("raw", RESULTS)
def test_the_answer_line_is_the_sdk_models_bytes(rid: Any, raw: dict[str, Any]) -> None:
    shaped = methods.serialize_server_result(
        "tools/call", VERSION, {**raw, "resultType": "complete"}
    )
    expected = JSONRPCResponse(jsonrpc="2.0", id=rid, result=shaped).model_dump_json(
        by_alias=True, exclude_unset=True
    )
    assert response_line(rid, shaped) == expected


def test_an_answer_the_sdk_cannot_encode_fails_the_same_way() -> None:
    bad = {"content": [{"type": "text", "text": "x\ud800"}], "resultType": "complete"}
    with pytest.raises(Exception) as sdk:
        JSONRPCResponse(jsonrpc="2.0", id=1, result=bad).model_dump_json(
            by_alias=True, exclude_unset=True
        )
    with pytest.raises(type(sdk.value)):
        response_line(1, bad)


# -- the fast path's context and shaping --------------------------------------------------


class _Handlers:
    """What the fast path asks of the gateway: ``_call_tool`` and the SDK ``server``."""

    def __init__(self) -> None:
        self.server = Server("toolscout", version="0.1.0", title="toolscout gateway")
        self.connections: list[Any] = []
        self.write_state = False
        self.hold: asyncio.Event | None = None

    async def _call_tool(self, ctx: Any, params: Any) -> CallToolResult:
        connection = ctx.session._connection
        self.connections.append(connection)
        if self.write_state:
            connection.state["mine"] = True
        if self.hold is not None:
            await self.hold.wait()
        return CallToolResult(content=[TextContent(type="text", text=params.arguments["text"])])


def _fast(handlers: _Handlers) -> FastCalls:
    lines = SimpleNamespace(hook=None)
    return FastCalls(handlers, lines, None)  # type: ignore[arg-type]


async def _answer(calls: FastCalls, line: str) -> str:
    plain = _plain_call(line)
    assert plain is not None
    return await calls._result(*plain)


def test_the_fast_paths_answer_is_the_sdk_runners_and_its_stamp_is_not_copied() -> None:
    handlers = _Handlers()
    calls = _fast(handlers)

    async def run() -> list[str]:
        return [await _answer(calls, _line(i, f"t{i}")) for i in range(3)]

    lines = asyncio.run(run())
    runner = ServerRunner(handlers.server, None, None)  # type: ignore[arg-type]
    for i, line in enumerate(lines):
        result = CallToolResult(content=[TextContent(type="text", text=f"t{i}")])
        shaped = runner._serialize("tools/call", VERSION, result)
        expected = JSONRPCResponse(jsonrpc="2.0", id=i, result=shaped)
        assert line == expected.model_dump_json(by_alias=True, exclude_unset=True)
    first = calls._runner()._serialize("tools/call", VERSION, CallToolResult(content=[]))
    second = calls._runner()._serialize("tools/call", VERSION, CallToolResult(content=[]))
    assert first["_meta"][STAMP_KEY] is second["_meta"][STAMP_KEY]  # no copy per call
    assert first["_meta"][STAMP_KEY] == handlers.server.server_info_stamp


def test_a_calls_connection_is_made_again_only_when_needed() -> None:
    handlers = _Handlers()
    calls = _fast(handlers)

    async def run() -> None:
        await _answer(calls, _line(1))
        await _answer(calls, _line(2))  # the same envelope: the same connection
        await _answer(calls, _line(3, client="other"))  # another client info: a new one
        handlers.write_state = True
        await _answer(calls, _line(4, client="other"))  # the same envelope as the last
        await _answer(calls, _line(5, client="other"))  # ... which left state on it

    asyncio.run(run())
    c1, c2, c3, c4, c5 = handlers.connections
    assert c1 is c2
    assert c3 is not c2
    assert c4 is c3
    assert c5 is not c4 and c5.state == {"mine": True}
    assert c3.client_params.client_info.name == "other"
    assert c1.client_params.client_info.name == "mcp"


def test_two_calls_in_flight_never_share_a_connection() -> None:
    handlers = _Handlers()
    calls = _fast(handlers)

    async def run() -> None:
        await _answer(calls, _line(1))  # a connection kept for the next call
        handlers.hold = asyncio.Event()
        first = asyncio.ensure_future(_answer(calls, _line(2)))
        second = asyncio.ensure_future(_answer(calls, _line(3)))
        while len(handlers.connections) < 3:
            await asyncio.sleep(0)
        handlers.hold.set()
        await asyncio.gather(first, second)

    asyncio.run(run())
    _, a, b = handlers.connections
    assert a is not b


# -- rounds -------------------------------------------------------------------------------


def test_a_caller_that_cannot_be_asked_runs_its_call_in_its_own_task() -> None:
    async def run(link: Link) -> bool:
        outer = asyncio.current_task()
        rounds = Rounds()

        async def call() -> bool:
            return asyncio.current_task() is outer

        same = await rounds.run("caller", link, None, call)
        assert link.asker is None and not rounds._waiting
        return bool(same)

    assert asyncio.run(run(Link(None))) is True  # no capabilities: no round, no task
    assert asyncio.run(run(capable_link())) is False  # sampling declared: its round


def test_a_retry_naming_no_round_is_refused_for_any_caller() -> None:
    from mcp.shared.exceptions import MCPError

    async def run() -> None:
        async def call() -> str:
            return "ran"

        params = SimpleNamespace(request_state="nope", input_responses={})
        with pytest.raises(MCPError, match="unknown or expired requestState"):
            await Rounds().run("caller", Link(None), params, call)

    asyncio.run(run())


# -- the link -----------------------------------------------------------------------------


def test_detached_is_replace_without_the_requests_parts() -> None:
    link = Link(SimpleNamespace(), caller="t\x00s")
    for field in dataclasses.fields(Link):  # every field away from its default
        if field.name not in ("ctx", "caller", "standalone"):
            setattr(link, field.name, {"set": field.name})
    expected = dataclasses.replace(
        link, error=None, standalone=True, task=None, task_session=None, asker=None
    )
    got = link.detached()
    assert got is not link
    for field in dataclasses.fields(Link):
        assert getattr(got, field.name) == getattr(expected, field.name), field.name


# -- the output schema ----------------------------------------------------------------------


class _Session:
    """The two things ``_fits_output_schema`` asks of the SDK's session, the compile
    counted (the SDK's own compile: ``check_schema``, then the validator)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._tool_output_schemas = {"t": schema}
        self.compiled = 0

    def _output_schema_validator(self, name: str, schema: dict[str, Any]) -> Any:
        from jsonschema.validators import validator_for

        self.compiled += 1
        cls = validator_for(schema)
        cls.check_schema(schema)
        return cls(schema)


def test_the_output_schema_is_compiled_once_per_schema_object() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    session = _Session(schema)
    good = SimpleNamespace(structured_content={"n": 1})
    bad = SimpleNamespace(structured_content={"n": "one"})
    assert [lean._fits_output_schema(session, "t", good) for _ in range(3)] == [True] * 3
    assert session.compiled == 1
    assert lean._fits_output_schema(session, "t", bad) is False  # the SDK's verdict then
    replaced = dict(schema)  # a listing that changes the schema: a new object
    session._tool_output_schemas["t"] = replaced
    assert lean._fits_output_schema(session, "t", good) is True
    assert session.compiled == 3  # the failure's own validator, then the new schema's


def test_an_invalid_output_schema_is_left_to_the_sdk_every_time() -> None:
    session = _Session({"type": "object", "properties": {"n": {"type": "integr"}}})
    result = SimpleNamespace(structured_content={"n": 1})
    assert lean._fits_output_schema(session, "t", result) is False
    assert lean._fits_output_schema(session, "t", result) is False
    assert session.compiled == 2


# -- the audit chain ------------------------------------------------------------------------


def test_a_rows_hash_over_a_tuple_is_its_hash_over_a_list() -> None:
    row = (7, 1.5, "s", "t", "app/echo", "d" * 64, "allowed", "ok", 0.25, "ok", "outcome", 6, "")
    for key in (None, b"k" * 32):
        assert _row_hash("a" * 64, row, key) == _row_hash("a" * 64, list(row), key)  # type: ignore[arg-type]


def test_an_attempt_completes_from_its_stored_values(tmp_path: Any) -> None:
    with AuditLog(tmp_path / "a.db", key="k" * 32) as log:
        attempt = log.begin(subject="s\x07", tenant="t", tool_id="app/echo", args_digest="d")
        outcome = log.complete(attempt, status="ok", reason="ok", latency_ms=1.5)
        other = AuditLog(tmp_path / "a.db", key="k" * 32)  # begun here, completed there
        second = log.begin(subject="s", tenant="t", tool_id="app/echo", args_digest="e")
        late = other.complete(second, status="error", reason="x", latency_ms=2.0)
        other.close()
        rows = log.read()
        assert log.verify().ok
    assert [r.kind for r in rows] == ["attempt", "outcome", "attempt", "outcome"]
    assert (outcome.subject, outcome.ref, outcome.id) == (rows[0].subject, attempt, rows[1].id)
    assert (late.args_digest, late.ref, late.decision) == ("e", second, "error")
