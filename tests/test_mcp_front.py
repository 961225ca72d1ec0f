"""``toolscout mcp serve`` over stdio answers ``tools/list``, ``search_tools`` and ``ping``
from the stored catalog before the MCP SDK is up (``mcp/front.py``), exactly as the SDK's
path answers them; everything else reaches the SDK in order, unchanged, once.

The early answers are held to the real SDK's serialisation for every protocol version
answered early and every listing mode, in the same gateway state; then driven over a real
pipe with raw JSON-RPC lines (the SDK client would hide a second answer) and with the
real SDK client (initialize, tools/list, a search, a forwarded call, later searches)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from _mcp_kit import py_server
from toolscout.cards import make_spec
from toolscout.mcp.config import MODES, load_config
from toolscout.mcp.early import HANDSHAKE_VERSIONS, Early
from toolscout.mcp.front import VERSIONS, Front
from toolscout.mcp.server import MCPGateway

WAIT_S = 120.0
_NOTE = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _initialize(version: str = "2025-06-18", id_: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "1"},
        },
    }


def _request(id_: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return message


def _search(id_: int, query: str, **more: Any) -> dict[str, Any]:
    arguments = {"query": query, **more}
    return _request(id_, "tools/call", {"name": "search_tools", "arguments": arguments})


# -- the early answers are the SDK's ---------------------------------------------------


async def _sdk_answers(gateway: MCPGateway, messages: list[dict[str, Any]]) -> list[Any]:
    """``messages`` put to the gateway's SDK server over in-memory streams; what it wrote
    (as the stdio transport dumps it), one answer per request."""
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCNotification, JSONRPCRequest

    send_in, recv_in = anyio.create_memory_object_stream[Any](16)
    send_out, recv_out = anyio.create_memory_object_stream[Any](16)
    got: list[dict[str, Any]] = []
    wanted = len([m for m in messages if "id" in m])
    async with send_in, recv_in, send_out, recv_out, anyio.create_task_group() as tg:
        options = gateway.server.create_initialization_options()
        tg.start_soon(gateway.server.run, recv_in, send_out, options)
        for message in messages:
            kind = JSONRPCRequest if "id" in message else JSONRPCNotification
            await send_in.send(SessionMessage(kind.model_validate(message)))
        with anyio.fail_after(WAIT_S):
            while len(got) < wanted:
                item = await recv_out.receive()
                dumped = item.message.model_dump(by_alias=True, exclude_unset=True, mode="json")
                if "id" in dumped:  # not a notification (a dynamic search's list_changed)
                    got.append(dumped)
        tg.cancel_scope.cancel()
    return got


def _stored_gateway(tmp: Path, mode: str, tools: int) -> MCPGateway:
    """A gateway over a stored catalog of ``tools`` tools of its one server (not started),
    as a stored start finds it."""
    path = tmp / f"{mode}-{tools}.json"
    servers = {"time": {"command": py_server("mcp-server-time"), "toolscout": {"scopes": ["t"]}}}
    section = {
        "mode": mode,
        "db": str(tmp / f"{mode}-{tools}.db"),
        "principal": {"subject": "me", "scopes": ["t"]},
    }
    path.write_text(json.dumps({"mcpServers": servers, "toolscout": section}))
    gateway = MCPGateway(load_config(path))
    subjects = ["weather", "invoice", "calendar", "ticket", "repository", "email", "payment"]
    specs = [
        make_spec(
            {
                "id": f"time/{subject}_{i}",
                "name": f"{subject}_{i}",
                "summary": f"Look up the {subject} record number {i} by its identifier.",
                "scopes": ["t"],
                "source": "mcp:time",
                "parameters": {
                    "type": "object",
                    "properties": {"id": {"type": "string", "description": "Its identifier."}},
                    "required": ["id"],
                },
            }
        )
        for i in range(tools)
        for subject in subjects[i % len(subjects) : i % len(subjects) + 1]
    ]
    gateway.ts.catalog.add(specs)
    gateway._stored = gateway._stored_servers()[1]
    return gateway


def _masked(answer: dict[str, Any]) -> dict[str, Any]:
    """A search's answer with its discovery id (one per discovery) masked."""
    text = json.loads(answer["content"][0]["text"])
    assert isinstance(text.pop("discovery_id"), str)
    structured = dict(answer["structuredContent"])
    assert structured.pop("discovery_id") == answer_id(answer)
    return {
        **answer,
        "content": [{**answer["content"][0], "text": text}],
        "structuredContent": structured,
    }


def answer_id(answer: dict[str, Any]) -> str:
    return str(json.loads(answer["content"][0]["text"])["discovery_id"])


@pytest.mark.parametrize(("mode", "tools"), [(m, 12) for m in MODES] + [("auto", 4)])
def test_the_early_answers_are_the_sdks(tmp_path: Path, mode: str, tools: int) -> None:
    gateway = _stored_gateway(tmp_path, mode, tools)
    front = Front(gateway)
    try:
        for version in HANDSHAKE_VERSIONS:
            messages = [
                _initialize(version),
                _NOTE,
                _request(2, "tools/list"),
                _request(3, "ping"),
                _search(4, "look up the weather record"),
            ]
            sdk = [m["result"] for m in anyio.run(_sdk_answers, gateway, messages)[1:]]
            ours = [front(m, version) for m in messages[2:]]
            if version not in VERSIONS:
                assert ours == [None, None, None]  # left to the SDK
                continue
            if mode == "dynamic":
                assert ours[2] is None  # it changes the caller's list: the SDK's path
                ours[2] = sdk[2]
            assert ours[:2] == sdk[:2], (mode, version)
            assert _masked(ours[2]) == _masked(sdk[2]), (mode, version)
            assert mode == "dynamic" or answer_id(ours[2]) != answer_id(sdk[2])  # one each
            assert len(sdk[0]["tools"]) == len(ours[0]["tools"]) >= 2
    finally:
        gateway.close()


def test_what_the_sdks_path_would_refuse_or_treat_otherwise_is_left_to_it(
    tmp_path: Path,
) -> None:
    gateway = _stored_gateway(tmp_path, "meta", 12)
    front = Front(gateway)
    try:
        version = VERSIONS[-1]
        for message in (
            _search(2, ""),  # the SDK's path answers its own error
            _search(2, "weather", k=11),
            _search(2, "weather", extra=1),
            _request(2, "tools/call", {"name": "call_tool", "arguments": {"name": "x"}}),
            _request(2, "tools/call", {"name": "search_tools", "arguments": []}),
            _request(2, "tools/call", {"name": "search_tools", "task": {}}),
            _request(2, "tools/list", {"cursor": "x"}),
            _request(2, "tools/list", []),  # type: ignore[arg-type]
            _request(2, "resources/list"),
            _request(2, "ping", {"_meta": "x"}),
        ):
            assert front(message, version) is None, message
        assert front(_request(2, "ping", {"_meta": {"progressToken": 1}}), version) == {}
        assert front(_search(2, "weather"), "2099-01-01") is None
    finally:
        gateway.close()
