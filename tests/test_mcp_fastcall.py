"""Plain ``tools/call`` requests answered below the SDK (``toolscout.mcp.fastcall``).

Two gateway processes over real pipes, one with the fast path and one with
``TOOLSCOUT_FASTCALL=off`` (every request through the SDK), are sent the same JSON-RPC
lines; every answer must be the same bytes. The calls cover a result, an unknown
tool, a tool the caller may not use, arguments that fail validation, an upstream's
``isError`` result, an oversized result, a string id, a meta-tool, a call asking for
progress and a task-augmented call (the last three stay on the SDK path). The audit
rows of both must be the same too. A cancelled call is never answered, its audit says
``cancelled``, the upstream is told, and the next call is answered.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from _mcp_kit import APP
from fork_kit import toolscout as fork_toolscout
from fork_kit import upstream as forked
from toolscout.gateway.audit import AuditLog

SRC = str(Path(__file__).resolve().parents[1] / "src")
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
BELOW = "first tools/call answered below the SDK"


async def _until_attempted(path: Path, tool_id: str, wait_s: float = 120.0) -> None:
    """Until the audit log holds an attempt of ``tool_id`` (written before the tool runs):
    a cancellation sent earlier could reach the call before it began, with nothing audited."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if path.exists():
            log = AuditLog(path)
            try:
                if any(r.tool_id == tool_id for r in log.read(subject="dev")):
                    return
            finally:
                log.close()
        await asyncio.sleep(0.05)
    raise AssertionError(f"no attempt of {tool_id} audited within {wait_s:g}s")


def _config(tmp: Path, name: str) -> Path:
    servers = {"app": {**forked(APP, "--stdio"),
                       "toolscout": {"scopes": [], "max_result_bytes": 4000,
                                     "tools": {"recall": {"scopes": ["secret"]}}}}}  # fmt: skip
    toolscout = {"mode": "direct", "connect_timeout_s": 60, "principal": {"subject": "dev"},
                 "db": str(tmp / f"{name}.db"), "rate_per_second": 0}  # fmt: skip
    path = tmp / f"{name}.json"
    path.write_text(json.dumps({"mcpServers": servers, "toolscout": toolscout}))
    return path


class Wire:
    """A gateway process spoken to in raw JSON-RPC lines."""

    def __init__(self, proc: asyncio.subprocess.Process, err: Any) -> None:
        self.proc = proc
        self.err = err
        self.notes: list[dict[str, Any]] = []

    @classmethod
    async def start(cls, config: Path, tmp: Path, fast: bool) -> Wire:
        env = {
            **os.environ,
            "PYTHONPATH": SRC,
            "XDG_DATA_HOME": str(tmp / "xdg"),
            "TOOLSCOUT_TIMELINE": "1",
            "TOOLSCOUT_FASTCALL": "on" if fast else "off",
        }
        err = (tmp / ("fast.err" if fast else "sdk.err")).open("wb")
        proc = await asyncio.create_subprocess_exec(
            *fork_toolscout("mcp", "serve", "--config", str(config)),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
            env=env, limit=1 << 24,
        )  # fmt: skip
        return cls(proc, err)

    async def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        await self.proc.stdin.drain()

    async def request(self, rid: Any, method: str, params: dict[str, Any]) -> bytes:
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return await self.answer(rid)

    async def answer(self, rid: Any, timeout: float = 90.0) -> bytes:
        """The next answer line; it must be to ``rid`` (notifications are kept aside)."""
        assert self.proc.stdout is not None
        while True:
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
            assert line, "the gateway closed its stdout"
            message = json.loads(line)
            if "id" not in message:
                self.notes.append(message)
                continue
            assert message["id"] == rid, (rid, line)
            return line

    async def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return await asyncio.wait_for(self.proc.wait(), 60)
        finally:
            self.err.close()


def _call(name: str, arguments: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "_meta": {**ENVELOPE, **extra.pop("meta", {})}}
    if arguments is not None:
        params["arguments"] = arguments
    return {**params, **extra}


CALLS: list[tuple[Any, dict[str, Any]]] = [
    (10, _call("echo", {"text": "h\u00e9llo \u2603"})),
    ("eleven", _call("echo", {"text": "a string id"})),
    (12, _call("nope", {})),  # unknown
    (13, _call("recall", {})),  # forbidden: looks like the unknown one
    (14, _call("echo", {"text": 5})),  # fails validation
    (15, _call("echo", {})),  # a required argument missing
    (16, _call("fail", {"why": "the disk is full"})),  # the upstream's isError result
    (17, _call("big", {"size": 10000})),  # over max_result_bytes
    (18, _call("big", {"size": 100})),
    (19, _call("recall", None)),  # no arguments at all
    (20, _call("search_tools", {"query": "echo a text", "k": 2})),  # a meta-tool: the SDK's
    (21, _call("echo", {"text": "progress"}, meta={"progressToken": "p1"})),  # the SDK's
    (22, _call("echo", {"text": "task"}, task={"ttl": 60000})),  # not plain: the SDK's
]


def _same_but_ids(fast: bytes, sdk: bytes) -> bool:
    """Search results carry a discovery id of their own process."""
    a, b = json.loads(fast), json.loads(sdk)
    for x in (a, b):
        structured = x.get("result", {}).get("structuredContent") or {}
        structured.pop("discovery_id", None)
        x.get("result", {}).pop("content", None)
    return bool(a == b)


def _audit_rows(path: Path) -> list[tuple[str, str, str]]:
    """(tool, status, reason) of the dev caller's audit rows, in order."""
    log = AuditLog(path)
    try:
        return [(r.tool_id, r.status, r.reason) for r in log.read(subject="dev")]
    finally:
        log.close()


def test_the_same_calls_get_the_same_bytes_through_both_paths(tmp_path: Path) -> None:
    async def session(fast: bool) -> tuple[dict[Any, bytes], int]:
        wire = await Wire.start(_config(tmp_path, "fast" if fast else "sdk"), tmp_path, fast)
        await wire.request(1, "server/discover", {"_meta": ENVELOPE})
        await wire.request(2, "tools/list", {"_meta": ENVELOPE})
        answers = {rid: await wire.request(rid, "tools/call", params) for rid, params in CALLS}
        return answers, await wire.close()

    async def both() -> tuple[dict[Any, bytes], dict[Any, bytes]]:
        (fast, rc1), (sdk, rc2) = await asyncio.gather(session(True), session(False))
        assert rc1 == rc2 == 0
        return fast, sdk

    fast, sdk = asyncio.run(both())
    for rid, _ in CALLS:
        if rid == 20:
            assert _same_but_ids(fast[rid], sdk[rid]), (fast[rid], sdk[rid])
        else:
            assert fast[rid] == sdk[rid], (rid, fast[rid], sdk[rid])
    # what each answer says (so that "the same" is not "the same failure")
    said = {rid: json.loads(line) for rid, line in fast.items()}
    assert said[10]["result"]["structuredContent"] == {"result": "h\u00e9llo \u2603"}
    assert "h\u00e9llo \u2603".encode() in fast[10]  # UTF-8 on the wire, as the SDK writes it
    assert said["eleven"]["id"] == "eleven"
    for rid in (12, 13, 14, 15, 16, 17, 19):
        assert said[rid]["result"]["isError"] is True, said[rid]
    assert "unknown_tool" in said[12]["result"]["content"][0]["text"]
    assert "missing_scope" in said[13]["result"]["content"][0]["text"]
    assert "the disk is full" in json.dumps(said[16])
    assert "response_too_large" in json.dumps(said[17])
    assert said[18]["result"]["isError"] is False
    # the fast gateway answered below the SDK, the other never did
    assert BELOW in (tmp_path / "fast.err").read_text()
    assert BELOW not in (tmp_path / "sdk.err").read_text()
    # the same audit rows: the attempt and the outcome of each call, in the same order
    rows = {name: _audit_rows(tmp_path / f"{name}.audit.db") for name in ("fast", "sdk")}
    assert rows["fast"] == rows["sdk"]
    assert ("app/echo", "ok", "ok") in rows["fast"] or any(
        r[0] == "app/echo" and r[1] == "ok" for r in rows["fast"]
    ), rows["fast"]


def test_a_cancelled_call_is_not_answered_and_the_upstream_is_told(tmp_path: Path) -> None:
    async def session() -> tuple[list[bytes], Wire]:
        wire = await Wire.start(_config(tmp_path, "fast"), tmp_path, fast=True)
        await wire.request(1, "server/discover", {"_meta": ENVELOPE})
        await wire.request(2, "tools/list", {"_meta": ENVELOPE})
        await wire.request(3, "tools/call", _call("echo", {"text": "first"}))
        await wire.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                         "params": _call("slow", {"seconds": 60})})  # fmt: skip
        await _until_attempted(tmp_path / "fast.audit.db", "app/slow")  # then it is running
        cancel = {"requestId": 4, "reason": "gave up", "_meta": ENVELOPE}
        await wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        # the next call is answered, and nothing is ever answered to id 4
        after = await wire.request(5, "tools/call", _call("echo", {"text": "after"}))
        return [after], wire

    async def run() -> tuple[list[bytes], int]:
        answers, wire = await session()
        return answers, await wire.close()

    (after,), rc = asyncio.run(run())
    assert rc == 0
    assert json.loads(after)["result"]["structuredContent"] == {"result": "after"}
    log = AuditLog(tmp_path / "fast.audit.db")
    try:
        slow = [r for r in log.read(subject="dev") if r.tool_id == "app/slow"]
    finally:
        log.close()
    assert slow and slow[-1].status == "cancelled", slow
    assert BELOW in (tmp_path / "fast.err").read_text()


def _line(params: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params, **extra}


@pytest.mark.parametrize(
    "line",
    [
        _line(_call("echo", {"text": "x"}), extra=1),  # a key JSON-RPC does not have
        _line(_call("echo", {}), id=True),  # a boolean id
        _line({"name": "echo"}),  # no envelope
        _line(_call("echo", {"text": "x"}, requestState="abc")),  # a round's retry
        _line(_call("call_tool", {})),  # a meta-tool
        _line(_call("echo", {}, meta={"progressToken": 3})),  # progress asked for
        _line(_call("echo", {}, task={"ttl": 1})),  # task-augmented
        _line({"name": "echo", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
        _line(_call("echo", {}, meta={"io.modelcontextprotocol/protocolVersion": "1999-01-01"})),
        _line(_call("echo", [])),  # arguments not an object
    ],
)
def test_only_a_plain_call_is_taken(line: dict[str, Any]) -> None:
    from toolscout.mcp.fastcall import _plain_call

    assert _plain_call(json.dumps(line)) is None
    assert _plain_call(json.dumps(_line(_call("echo", {})))) is not None


def test_the_era_is_the_one_the_sdk_decides_from_the_first_request() -> None:
    from toolscout.mcp.fastcall import _era_of

    def era(message: dict[str, Any]) -> str | None:
        return _era_of(json.dumps(message))

    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover"}
    assert era({**discover, "params": {"_meta": ENVELOPE}}) == "modern"
    assert era({**discover, "params": {}}) == "legacy"
    assert era({**discover, "method": "initialize", "params": {"_meta": ENVELOPE}}) == "legacy"
    # not a request the SDK takes: the era stays open
    assert era({"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    assert era({**discover, "id": True, "params": {"_meta": ENVELOPE}}) is None
    assert era({**discover, "jsonrpc": "1.0", "params": {"_meta": ENVELOPE}}) is None
    assert _era_of("not json\n") is None


ASKER = r"""
const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StdioServerTransport } = require("@modelcontextprotocol/sdk/server/stdio.js");
const { ElicitResultSchema } = require("@modelcontextprotocol/sdk/types.js");

const server = new McpServer({ name: "asker", version: "1.0.0" });
server.registerTool("whom", { description: "Greet someone; asks the user whom" },
  async (extra) => {
    const answer = await extra.sendRequest({ method: "elicitation/create", params: {
      message: "Whom shall I greet?", requestedSchema: { type: "object",
        properties: { name: { type: "string" } }, required: ["name"] } } }, ElicitResultSchema);
    return { content: [{ type: "text", text: `Hello ${answer.content.name}` }] };
  });
server.connect(new StdioServerTransport());
"""


def test_an_upstreams_question_is_the_same_input_required_round_on_both_paths(
    tmp_path: Path,
) -> None:
    """A plain call whose upstream asks its client (elicitation) is answered with the same
    input-required result on both paths; the retry carrying the answer (the SDK's path,
    from the same rounds) finishes it."""
    from _mcp_kit import node_env, node_script

    cmd = node_script(tmp_path / "asker.cjs", ASKER)
    envelope = {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}

    def config(name: str) -> Path:
        servers = {"asker": {"command": cmd[0], "args": cmd[1:], "env": node_env(),
                             "toolscout": {"scopes": []}}}  # fmt: skip
        toolscout = {"mode": "direct", "connect_timeout_s": 60, "principal": {"subject": "dev"},
                     "db": str(tmp_path / f"{name}.db"), "rate_per_second": 0}  # fmt: skip
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"mcpServers": servers, "toolscout": toolscout}))
        return path

    async def session(fast: bool) -> tuple[dict[str, Any], bytes]:
        wire = await Wire.start(config("fast" if fast else "sdk"), tmp_path, fast)
        await wire.request(1, "server/discover", {"_meta": envelope})
        await wire.request(2, "tools/list", {"_meta": envelope})
        asked = json.loads(
            await wire.request(
                3, "tools/call", {"name": "whom", "arguments": {}, "_meta": envelope}
            )
        )
        result = asked["result"]
        (key,) = result["inputRequests"]
        answer = {"action": "accept", "content": {"name": "Ada"}}
        state = result["requestState"]
        retry = {"name": "whom", "arguments": {}, "_meta": envelope,
                 "requestState": state, "inputResponses": {key: answer}}  # fmt: skip
        done = await wire.request(4, "tools/call", retry)
        assert await wire.close() == 0
        return asked, done

    async def both() -> tuple[tuple[dict[str, Any], bytes], tuple[dict[str, Any], bytes]]:
        fast, sdk = await asyncio.gather(session(True), session(False))
        return fast, sdk

    (asked_fast, done_fast), (asked_sdk, done_sdk) = asyncio.run(both())
    assert asked_fast["result"]["resultType"] == "input_required", asked_fast
    for asked in (asked_fast, asked_sdk):
        asked["result"].pop("requestState")  # unguessable, per process
    assert asked_fast == asked_sdk
    assert done_fast == done_sdk
    assert json.loads(done_fast)["result"]["content"][0]["text"] == "Hello Ada"
    assert BELOW in (tmp_path / "fast.err").read_text()


RAW = Path(__file__).resolve().parent / "mcp_raw_upstream.py"
LEAN = "first upstream tools/call answered by the gateway's own client"


def _raw_config(tmp: Path, name: str, timeout_s: float = 1.0) -> Path:
    """The gateway over the raw upstream, its calls' deadline ``timeout_s`` without progress."""
    servers = {"raw": {"command": sys.executable, "args": [str(RAW)],
                       "toolscout": {"scopes": [], "timeout_s": timeout_s}}}  # fmt: skip
    toolscout = {"mode": "direct", "connect_timeout_s": 60, "principal": {"subject": "dev"},
                 "db": str(tmp / f"{name}.db"), "rate_per_second": 0}  # fmt: skip
    path = tmp / f"{name}.json"
    path.write_text(json.dumps({"mcpServers": servers, "toolscout": toolscout}))
    return path


RAW_CALLS: list[tuple[Any, dict[str, Any]]] = [
    (30, _call("ok", {})),
    (31, _call("malformed", {})),  # not a CallToolResult: tool_failed
    (32, _call("refuse", {})),  # a JSON-RPC error: the upstream refused
    (33, _call("progress", {"seconds": 2.0})),  # 2 s, but progress moves the 1 s deadline
    (34, _call("ok", {"seconds": 1})),
    (35, _call("shape", {})),  # breaks its output schema (last: the link is then re-made)
]


def test_the_gateways_own_upstream_client_answers_what_the_sdks_does(tmp_path: Path) -> None:
    """Through the gateway's own upstream client (fast gateway) and the SDK's ``Client``
    (``TOOLSCOUT_FASTCALL=off``): the same bytes and audit rows for a result, a malformed
    result, a JSON-RPC error, a call kept alive past its deadline by progress, and a result
    breaking its tool's output schema."""

    async def session(fast: bool) -> dict[Any, bytes]:
        name = "fast" if fast else "sdk"
        wire = await Wire.start(_raw_config(tmp_path, name), tmp_path, fast)
        await wire.request(1, "server/discover", {"_meta": ENVELOPE})
        await wire.request(2, "tools/list", {"_meta": ENVELOPE})
        answers = {rid: await wire.request(rid, "tools/call", p) for rid, p in RAW_CALLS}
        assert await wire.close() == 0
        return answers

    async def both() -> tuple[dict[Any, bytes], dict[Any, bytes]]:
        fast, sdk = await asyncio.gather(session(True), session(False))
        return fast, sdk

    fast, sdk = asyncio.run(both())
    for rid, _ in RAW_CALLS:
        assert fast[rid] == sdk[rid], (rid, fast[rid], sdk[rid])
    said = {rid: json.loads(line)["result"] for rid, line in fast.items()}
    assert said[30]["structuredContent"] == {"value": "fine"} and not said[30]["isError"]
    assert said[31]["isError"] and "malformed result" in json.dumps(said[31])
    assert said[32]["isError"] and "the raw upstream refuses" in json.dumps(said[32])
    assert said[33]["structuredContent"] == {"value": "10 steps"}, said[33]
    assert said[35]["isError"] and "upstream_unavailable" in json.dumps(said[35])
    assert LEAN in (tmp_path / "fast.err").read_text()
    assert LEAN not in (tmp_path / "sdk.err").read_text()
    rows = {name: _audit_rows(tmp_path / f"{name}.audit.db") for name in ("fast", "sdk")}
    assert rows["fast"] == rows["sdk"]
    assert ("raw/malformed", "error", "tool_failed") in rows["fast"], rows["fast"]


def test_a_call_cancelled_on_the_gateways_own_client_is_cancelled_upstream(
    tmp_path: Path,
) -> None:
    """A caller's cancellation of a call in flight on the gateway's own upstream client
    reaches the upstream as ``notifications/cancelled`` for the id it was sent with."""

    async def run() -> list[Any]:
        config = _raw_config(tmp_path, "fast", timeout_s=120.0)
        wire = await Wire.start(config, tmp_path, fast=True)
        await wire.request(1, "server/discover", {"_meta": ENVELOPE})
        await wire.request(2, "tools/list", {"_meta": ENVELOPE})
        await wire.request(3, "tools/call", _call("ok", {}))
        await wire.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                         "params": _call("hang", {})})  # fmt: skip
        await _until_attempted(tmp_path / "fast.audit.db", "raw/hang")
        cancel = {"requestId": 4, "reason": "gave up", "_meta": ENVELOPE}
        await wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        seen: list[Any] = []
        for rid in range(5, 100):  # until the upstream has read the cancellation
            answer = json.loads(await wire.request(rid, "tools/call", _call("cancelled", {})))
            seen = json.loads(answer["result"]["structuredContent"]["value"])
            if seen:
                break
            await asyncio.sleep(0.1)
        assert await wire.close() == 0
        return seen

    seen = asyncio.run(run())
    assert len(seen) == 1 and str(seen[0]).startswith("toolscout-"), seen
    log = AuditLog(tmp_path / "fast.audit.db")
    try:
        hang = [r for r in log.read(subject="dev") if r.tool_id == "raw/hang"]
    finally:
        log.close()
    assert hang[-1].status == "cancelled", hang
    assert LEAN in (tmp_path / "fast.err").read_text()
