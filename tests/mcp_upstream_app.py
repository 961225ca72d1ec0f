"""A small upstream MCP server written with the SDK's ``MCPServer``, for fault injection.

Run: ``python tests/mcp_upstream_app.py --port 8123 [--stdio] [--many N --topic T]
[--delay S] [--evil]``.
Tools: ``echo`` (read-only), ``slow`` (sleeps), ``big`` (a large result), ``fail``
(an isError result), ``add_tool`` (publishes a new tool and announces
``tools/list_changed``), and with ``--many`` N generated tools about ``--topic``;
a resource ``note://<topic>/readme`` and a prompt ``summarise``.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

VERBS = [
    "list",
    "get",
    "create",
    "update",
    "delete",
    "search",
    "export",
    "archive",
    "sync",
    "count",
]
NOUNS = [
    "invoices", "customers", "tickets", "orders", "shipments", "contracts", "payments",
    "refunds", "subscriptions", "leads", "campaigns", "products", "warehouses", "suppliers",
    "employees", "timesheets", "expenses", "budgets", "reports", "dashboards", "alerts",
    "incidents", "deployments", "repositories", "branches", "builds", "artifacts", "secrets",
    "certificates", "domains", "mailboxes", "calendars", "meetings", "documents", "folders",
    "spreadsheets", "forms", "surveys", "webhooks", "api_keys", "roles", "users", "groups",
    "devices", "licenses", "backups", "snapshots", "volumes", "clusters", "queues",
]  # fmt: skip


def _generated(label: str) -> Callable[..., str]:
    def generated(query: str = "", limit: int = 10) -> str:
        return f"{label}: {query} ({limit})"

    return generated


def build(topic: str, many: int, *, evil: bool = False) -> MCPServer:
    server: MCPServer = MCPServer(f"upstream-{topic}", version="1.0.0", log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True)

    @server.tool(annotations=read_only, title="Echo text")
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool(annotations=read_only)
    async def slow(seconds: float) -> str:
        """Wait this many seconds, then answer."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool(annotations=read_only)
    def big(size: int) -> str:
        """Return a text of this many characters."""
        return "x" * size

    @server.tool(annotations=read_only)
    def fail(why: str) -> str:
        """Always fail with this reason."""
        raise ToolError(f"failed on purpose: {why}")

    memory: dict[str, str] = {}

    @server.tool(annotations=read_only)
    async def progress(seconds: float, ctx: Context) -> str:
        """Work this many seconds, reporting progress every 0.2 s."""
        steps = max(1, int(seconds / 0.2))
        for i in range(steps):
            await asyncio.sleep(0.2)
            await ctx.report_progress(i + 1, steps, f"step {i + 1} of {steps}")
        return f"worked {seconds}"

    @server.tool(annotations=ToolAnnotations(destructive_hint=False))
    def remember(text: str) -> str:
        """Keep a text in this server's memory (its session state)."""
        memory["text"] = text
        return "kept"

    @server.tool(annotations=read_only)
    def recall() -> str:
        """The text this server keeps, if any."""
        return memory.get("text", "(nothing)")

    @server.tool(annotations=ToolAnnotations(destructive_hint=False))
    async def add_tool(name: str, description: str, ctx: Context) -> str:
        """Publish a new tool with this name and description."""

        def added(value: str = "") -> str:
            return f"{name} ran with {value!r}"

        server.add_tool(added, name=name, description=description, annotations=read_only)
        await ctx.notify_tools_changed()
        return f"added {name}"

    @server.resource(f"note://{topic}/readme", name="readme", mime_type="text/plain")
    def readme() -> str:
        """What this server is for."""
        return f"the {topic} upstream"

    @server.prompt()
    def summarise(subject: str) -> str:
        """Ask for a summary of a subject."""
        return f"Summarise {subject} in three sentences."

    if evil:  # upstream text that is Rich markup, and a secret in an error

        @server.tool(annotations=read_only)
        def markup(text: str) -> str:
            """Closes [/bold] a tag it never opened, and [red]colours[/red] the rest."""
            return text

    for i in range(many):
        verb, noun = VERBS[i % len(VERBS)], NOUNS[(i // len(VERBS)) % len(NOUNS)]

        server.add_tool(
            _generated(f"{verb} {noun}"),
            name=f"{verb}_{noun}_{i}",
            description=f"{verb.capitalize()} {noun.replace('_', ' ')} in the {topic} system.",
            annotations=read_only,
        )
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--many", type=int, default=0)
    parser.add_argument("--topic", default="test")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before serving")
    parser.add_argument("--evil", action="store_true")
    args = parser.parse_args()
    if args.delay:  # a server slow to start (a cold npx, a JVM)
        import time

        time.sleep(args.delay)
    server = build(args.topic, args.many, evil=args.evil)
    if args.stdio:
        asyncio.run(server.run_stdio_async())
    else:
        asyncio.run(server.run_streamable_http_async(host="127.0.0.1", port=args.port))


if __name__ == "__main__":
    main()
