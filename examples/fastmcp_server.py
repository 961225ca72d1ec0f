"""FastMCP: one line gives a server toolscout's search (entitle first, hybrid ranking) and a
call_tool that goes through its gateway. FastMCP's own client plays the caller in process:
a search, a call, and a call the caller's token does not allow (refused and audited).

Run: PYTHONPATH=src python examples/fastmcp_server.py"""

import asyncio

from _demo import KEY, shop_server
from fastmcp import Client

from toolscout import Settings, Toolscout, issue_token
from toolscout.adapters.fastmcp import ToolscoutSearchTransform


async def main() -> None:
    mcp = shop_server()  # find_order, and refund_order (needs shop:admin)
    with Toolscout.open(Settings(db=":memory:", jwt_key=KEY)) as ts:
        token = issue_token(subject="alice", key=KEY, scopes=["shop:read"])
        mcp.add_transform(ToolscoutSearchTransform(ts, token))  # the one line
        async with Client(mcp) as client:
            found = await client.call_tool("search_tools", {"query": "where is my order"})
            print("found:", [tool["name"] for tool in found.data])
            for name in ("find_order", "refund_order"):
                call = {"name": name, "arguments": {"order_id": "94218"}}
                result = await client.call_tool("call_tool", call, raise_on_error=False)
                print(name, "->", result.content[0].text)
        calls = [r for r in ts.audit.read(outcomes=True) if r.kind in ("outcome", "record")]
        print("audit:", [(r.tool_id, r.status) for r in calls])


asyncio.run(main())
