"""The MCP SDK's (and pydantic's) names the gateway's per-call paths use, in one holder.

The fast path of the caller's side (:mod:`toolscout.mcp.fastcall`), the gateway's own
upstream ``tools/call`` (:mod:`toolscout.mcp.lean`) and an upstream request's fault
handling (:mod:`toolscout.mcp.connection`) look these names up on every call. They are
imported once, by the first call that needs one (:func:`sdk_names`): not per call (an
import inside a function costs a lookup in ``sys.modules`` and a lock each time), and
not at this module's import, which the start-up path makes before it loads the SDK.

The client's and the server's names are held together: each side's modules load the
whole ``mcp`` package, so by the first call the other side's names cost nothing more.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SdkNames", "sdk_names"]


class SdkNames:
    """The names, imported when the holder is made (the SDK is loaded by then)."""

    def __init__(self) -> None:
        import anyio
        from mcp.client import session
        from mcp.server.connection import Connection, NotifyOnlyOutbound
        from mcp.server.context import ServerRequestContext
        from mcp.server.runner import ServerRunner, aclose_shielded, modern_error_data
        from mcp.server.session import ServerSession
        from mcp.shared.dispatcher import as_request_id, coerce_request_id
        from mcp.shared.exceptions import MCPError
        from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
        from mcp.types import (
            CallToolRequestParams,
            CallToolResult,
            ErrorData,
            InputRequiredResult,
            JSONRPCError,
        )
        from mcp_types import CONNECTION_CLOSED, HEADER_MISMATCH, methods
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS
        from pydantic import ValidationError
        from pydantic_core import to_json

        # shared: the SDK's error, its JSON-RPC error body, the per-method checks
        self.MCPError: Any = MCPError
        self.ErrorData: Any = ErrorData
        self.methods: Any = methods
        self.CONNECTION_CLOSED: int = CONNECTION_CLOSED
        # an upstream call (mcp/lean.py, mcp/connection.py)
        self.pipe_errors: tuple[type[BaseException], ...] = (
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            OSError,
        )
        self.session: Any = session
        self.CallToolResult: Any = CallToolResult
        self.InputRequiredResult: Any = InputRequiredResult
        self.HEADER_MISMATCH: int = HEADER_MISMATCH
        self.MODERN: Any = MODERN_PROTOCOL_VERSIONS
        self.ValidationError: Any = ValidationError
        # a caller's call answered below the SDK's dispatcher (mcp/fastcall.py)
        self.Connection: Any = Connection
        self.NotifyOnlyOutbound: Any = NotifyOnlyOutbound
        self.ServerRequestContext: Any = ServerRequestContext
        self.ServerRunner: Any = ServerRunner
        self.aclose_shielded: Any = aclose_shielded
        self.modern_error_data: Any = modern_error_data
        self.ServerSession: Any = ServerSession
        self.as_request_id: Any = as_request_id
        self.coerce_request_id: Any = coerce_request_id
        self.InboundLadderRejection: Any = InboundLadderRejection
        self.classify_inbound_request: Any = classify_inbound_request
        self.CallToolRequestParams: Any = CallToolRequestParams
        self.JSONRPCError: Any = JSONRPCError
        self.to_json: Any = to_json


_NAMES: SdkNames | None = None


def sdk_names() -> SdkNames:
    """The one :class:`SdkNames`, made by the first call."""
    global _NAMES
    if _NAMES is None:
        _NAMES = SdkNames()
    return _NAMES
