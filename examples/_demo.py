"""What every example shares (not part of the 25 lines each shows): the demo catalog
with one pinned tool, a support agent's token, and the local endpoint that replays the
recorded model responses of ``recordings/<name>.json`` (no model is ever called); for
the FastMCP example, a small FastMCP server.

The catalog is indexed once into ``$TOOLSCOUT_EXAMPLE_DB`` (default: a file in the
system's temporary directory); later runs find it unchanged and start at once.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from toolscout import DryRunExecutor, Settings, Toolscout, issue_token
from toolscout.adapters.replay import ReplayEndpoint
from toolscout.loader import demo_catalog_dir, read_catalog, read_policy

KEY = "an-example-secret-of-32-bytes!!!"
RECORDINGS = Path(__file__).resolve().parent / "recordings"
#: sent on every turn, never deferred: the tool support agents use all the time
PINNED = ("docs.search_docs",)


def demo() -> Toolscout:
    """The demo catalog, its policy with :data:`PINNED`, tools that run nothing."""
    default = Path(tempfile.gettempdir()) / "toolscout-examples.db"
    db = Path(os.environ.get("TOOLSCOUT_EXAMPLE_DB") or default)
    ts = Toolscout.open(Settings(db=db, jwt_key=KEY), executors=DryRunExecutor())
    policy = replace(read_policy(demo_catalog_dir() / "policy.yaml"), pinned=PINNED)
    if ts.catalog.policy != policy:
        ts.catalog.set_policy(policy)
    ts.add(read_catalog([demo_catalog_dir()]))  # unchanged tools are not re-indexed
    return ts


def token(role: str = "support_agent") -> str:
    """A bearer token for alice of tenant acme, in ``role``."""
    return issue_token(subject="alice", key=KEY, tenant="acme", roles=[role])


def replay(name: str) -> ReplayEndpoint:
    """The local endpoint replaying ``recordings/<name>.json``."""
    return ReplayEndpoint.from_file(RECORDINGS / f"{name}.json")


def shop_server() -> Any:
    """A FastMCP server with two tools; refunds need ``shop:admin`` in toolscout's policy
    (set on the tool as ``meta={"toolscout": {"scopes": [...]}}``)."""
    from fastmcp import FastMCP

    mcp = FastMCP("shop")

    @mcp.tool
    def find_order(order_id: str) -> str:
        """Look up one order by its id: its status and shipping."""
        return f"order {order_id}: shipped"

    @mcp.tool(meta={"toolscout": {"scopes": ["shop:admin"]}})
    def refund_order(order_id: str) -> str:
        """Refund an order's payment to the customer."""
        return f"refunded order {order_id}"

    return mcp
