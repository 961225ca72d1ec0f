"""Answering ``tools/list`` and ``search_tools`` over stdio before the MCP SDK is up.

Importing the MCP SDK is most of a stdio start (1.5 s of CPU of 2.2 on the machine the
benchmarks run on: its pydantic models for every protocol version), and the library
alone — the stored catalog open, the encoder loading on its thread — is ready well before
it. From the moment the catalog is open until the SDK's session takes stdin over, the
early reader (:class:`~toolscout.mcp.early.Early`, which answered ``initialize``) offers
each request of the client to :class:`Front`, which answers from the stored catalog what
the SDK's path would answer in the same state, as the same wire dict:

* ``ping`` — ``{}``;
* ``tools/list`` — the meta-tools and the tools of the listing mode
  (:meth:`~toolscout.mcp.tools.ToolHandlers.listed_ids`, :meth:`render_wire`);
* ``tools/call`` of ``search_tools`` — through the same ``Toolscout.discover`` (the
  configured principal: same tenant, same entitlement; the discovery log records it once)
  and the same payload function as the SDK's path
  (:meth:`~toolscout.mcp.tools.ToolHandlers.search_payload`: the caller's recent
  discoveries noted in the gateway's own per-caller state, which the SDK's session then
  serves; in the ``dynamic`` mode the tools found added to the caller's list there too,
  and ``notifications/tools/list_changed`` written before the answer, as the SDK's path
  does; the "still indexing" note from the same upstream state).

Not answered here, so left to the SDK in their order: everything else, a request after
one left to the SDK (the order of their effects is kept), arguments
the SDK's path refuses or a request with fields beyond the plain ones (a task, a cursor),
a protocol version not in :data:`VERSIONS`, and a start where the SDK's path would wait
for an upstream (a server with nothing in the stored catalog) or drop stale tools first.
``tests/test_mcp_front.py`` holds every answer to the SDK's serialisation per protocol
version and listing mode, and drives the whole over a real pipe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from toolscout.mcp.early import send
from toolscout.mcp.meta import SEARCH, meta_tool_wire, result_wire
from toolscout.mcp.timeline import mark

if TYPE_CHECKING:
    from toolscout.mcp.server import MCPGateway

__all__ = ["LIST_CHANGED", "VERSIONS", "Front"]

#: the protocol versions answered here (the handshake versions whose serialisation of
#: these results the tests hold equal to the SDK's)
VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
_PLAIN = frozenset({"_meta"})
#: what the SDK writes when a session's tool list changed (a dynamic search added tools)
LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


class Front:
    """The answers of a gateway (its stored catalog open, the SDK not yet imported)."""

    def __init__(self, gateway: MCPGateway, notify: Callable[[dict[str, Any]], Any] = send) -> None:
        self.gateway = gateway
        self.notify = notify  # a notification to the client, before the answer

    def __call__(self, message: dict[str, Any], version: str) -> dict[str, Any] | None:
        """The result answering the request ``message`` on a connection of protocol
        ``version``, as the SDK would send it; None when it is left to the SDK."""
        if version not in VERSIONS:
            return None
        method, params = message.get("method"), message.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict) or not isinstance(params.get("_meta", {}), dict):
            return None
        if method == "ping" and set(params) <= _PLAIN:
            return {}
        if method == "tools/list" and set(params) <= _PLAIN:
            return self.list_tools()
        if method == "tools/call" and set(params) <= _PLAIN | {"name", "arguments"}:
            arguments = params.get("arguments")
            if params.get("name") == SEARCH and isinstance(arguments, dict | None):
                return self.search(arguments or {})
        return None

    def list_tools(self) -> dict[str, Any]:
        """``tools/list``: what :meth:`ToolHandlers._list_tools` lists."""
        gw = self.gateway
        principal = gw.config.principal
        assert principal is not None  # stdio: the configured caller (check_transport)
        mode = gw.mode(principal)
        tools = [] if mode == "direct" else meta_tool_wire()
        tools += gw.render_wire(gw.listed_ids(principal, mode))
        mark("first tools/list answered early", once=True)
        return {"tools": tools}

    def search(self, args: Mapping[str, Any]) -> dict[str, Any] | None:
        """``search_tools``: what :meth:`ToolHandlers._search` answers (None: left to it)."""
        gw = self.gateway
        principal = gw.config.principal
        assert principal is not None
        if gw.search_problem(args) is not None:
            return None
        mark("first search_tools received early", once=True)
        shortlist = gw.ts.discover(principal, args["query"], **gw.search_options(args))
        payload = gw.search_payload(principal, shortlist)
        if gw.add_found(principal, payload):  # dynamic: the list changed, as the SDK tells
            self.notify(LIST_CHANGED)
        mark("first search_tools answered early", once=True)
        return result_wire(payload)
