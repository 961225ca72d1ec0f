"""FastMCP: toolscout's search transform on a real FastMCP server, driven by FastMCP's
own client in process."""

from __future__ import annotations

import asyncio
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

fastmcp = pytest.importorskip("fastmcp")
# imported here, at collection, not lazily by ``fastmcp.Client`` inside a test: it imports
# py-key-value modules through beartype's import hook, which parses them into Python AST
# objects; CPython 3.11's AST converter keeps one recursion counter for all threads, so
# another thread making AST objects at that moment fails it with "SystemError: AST
# constructor recursion depth mismatch" (it failed a full run on a loaded machine)
importlib.import_module("fastmcp.client")

from toolscout import Principal, Settings, Toolscout, issue_token, make_spec  # noqa: E402
from toolscout.adapters.fastmcp import ToolscoutSearchTransform, specs_of  # noqa: E402

KEY = "a-fastmcp-test-secret-of-32-bytes"
ALICE = issue_token(subject="alice", key=KEY, scopes=["shop:read"], ttl_seconds=7 * 86400)


def _server() -> Any:
    mcp = fastmcp.FastMCP("shop")

    @mcp.tool
    def find_order(order_id: str) -> str:
        """Retrieve one order by its id, with its shipping status."""
        return f"order {order_id}: shipped"

    @mcp.tool
    def refund_payment(order_id: str, amount: float) -> str:
        """Refund part or all of an order's payment to the customer's card."""
        return f"refunded {amount} on {order_id}"

    @mcp.tool
    def weather(city: str) -> str:
        """Current weather for a city."""
        return "sunny"

    return mcp


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_search_and_call_through_the_transform(tmp_path: Path) -> None:
    mcp = _server()

    async def play() -> None:
        tools = await mcp.list_tools()
        specs = {s.id: s for s in specs_of(tools)}
        scoped = [  # toolscout's policy: refunds need an admin scope alice lacks
            make_spec({"id": s.id, "name": s.id, "summary": s.card.summary,
                       "parameters": s.parameters,
                       "scopes": ["shop:admin"] if s.id == "refund_payment" else ["shop:read"]})
            for s in specs.values()
        ]  # fmt: skip
        with Toolscout.open(Settings(db=tmp_path / "t.db", jwt_key=KEY)) as ts:
            ts.add(scoped)
            mcp.add_transform(ToolscoutSearchTransform(ts, ALICE, max_results=2, index=False))
            async with fastmcp.Client(mcp) as client:
                listed = sorted(t.name for t in await client.list_tools())
                assert listed == ["call_tool", "search_tools"]
                found = json.loads(_text(await client.call_tool(
                    "search_tools", {"query": "where is my order, has it shipped"})))  # fmt: skip
                names = [t["name"] for t in found]
                assert names[0] == "find_order" and "refund_payment" not in names
                named = json.loads(_text(await client.call_tool(
                    "search_tools", {"query": "select:weather"})))  # fmt: skip
                assert named[0]["name"] == "weather"
                ran = await client.call_tool(
                    "call_tool", {"name": "find_order", "arguments": {"order_id": "7"}}
                )
                assert _text(ran) == "order 7: shipped"
                refused = await client.call_tool(
                    "call_tool", {"name": "refund_payment",
                                  "arguments": {"order_id": "7", "amount": 1.0}},
                    raise_on_error=False,
                )  # fmt: skip
                assert refused.is_error and _text(refused).startswith("refused: missing_scope")
                assert refused.meta["toolscout"]["reason"] == "missing_scope"
                forged = ToolscoutSearchTransform(ts, ALICE[:-4] + "AAAA", index=False)
                mcp.add_transform(forged)
                bad = await client.call_tool(
                    "call_tool", {"name": "find_order", "arguments": {"order_id": "7"}},
                    raise_on_error=False,
                )  # fmt: skip
                assert bad.is_error and _text(bad).startswith("refused: token_bad_signature")
            rows = [r for r in ts.audit.read(outcomes=True) if r.kind != "admin"]
        # every call went through the gateway and is in its audit: the run, then the refusals
        assert [(r.subject, r.tool_id, r.status) for r in rows[:2]] == [
            ("alice", "find_order", "ok"),
            ("alice", "refund_payment", "refused"),
        ]
        assert rows[1].reason == "missing_scope" and rows[2].status == "refused"

    asyncio.run(play())


def test_arguments_are_validated_and_a_failing_tool_is_audited(tmp_path: Path) -> None:
    mcp = _server()

    @mcp.tool
    def explode(reason: str) -> str:
        """Fail on purpose, with the given reason."""
        raise RuntimeError(f"boom: {reason}")

    async def play() -> None:
        with Toolscout.open(Settings(db=tmp_path / "t.db")) as ts:
            mcp.add_transform(ToolscoutSearchTransform(ts, Principal.of("bob")))
            async with fastmcp.Client(mcp) as client:
                wrong = await client.call_tool(
                    "call_tool", {"name": "find_order", "arguments": {"order": 7}},
                    raise_on_error=False,
                )  # fmt: skip
                assert wrong.is_error and _text(wrong).startswith("refused: unknown_parameter")
                failed = await client.call_tool(
                    "call_tool", {"name": "explode", "arguments": {"reason": "secret-detail"}},
                    raise_on_error=False,
                )  # fmt: skip
                assert failed.is_error and "tool_failed" in _text(failed)
                assert "secret-detail" not in _text(failed)  # kept for the audit only
            rows = [r for r in ts.audit.read(outcomes=True) if r.kind != "admin"]
        assert [(r.tool_id, r.status) for r in rows] == [("find_order", "refused"),
                                                         ("explode", "error")]  # fmt: skip
        assert "secret-detail" in rows[1].detail

    asyncio.run(play())


def test_the_server_tools_are_indexed_on_first_search(tmp_path: Path) -> None:
    mcp = _server()

    async def play() -> None:
        with Toolscout.open(Settings(db=tmp_path / "t.db")) as ts:
            mcp.add_transform(ToolscoutSearchTransform(ts, Principal.of("bob")))
            async with fastmcp.Client(mcp) as client:
                found = json.loads(_text(await client.call_tool(
                    "search_tools", {"query": "select:refund_payment"})))  # fmt: skip
            assert found[0]["name"] == "refund_payment"  # three tools: all shown, named first
            assert len(found) == 3
            assert {c.id for c in ts.catalog.cards()} == {"find_order", "refund_payment",
                                                          "weather"}  # fmt: skip

    asyncio.run(play())
