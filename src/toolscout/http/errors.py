"""The one JSON error shape of the HTTP API, and how every failure maps onto it.

Every error response is ``{"error": {"code": "<stable code>", "message": "<one line>"}}``.
Codes are stable; messages are safe to show to a caller (no stack trace, no
detail the caller may not know: an unknown and a forbidden tool look the same).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from toolscout.errors import (
    AdminDenied,
    CardError,
    CatalogFileError,
    ConfigError,
    FormatError,
    ImportRefused,
    QueryError,
    StoreError,
    TokenError,
    ToolscoutError,
    UnknownDiscoveryError,
    UnknownToolError,
)


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


class APIError(Exception):
    """An error answered to the caller with ``status`` and a stable ``code``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status = status
        self.code = code
        self.message = " ".join(message.split())[:500]
        super().__init__(message)


def body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": " ".join(message.split())[:500]}}


def from_library(exc: ToolscoutError) -> APIError:
    """The HTTP form of a library error."""
    if isinstance(exc, TokenError):
        return APIError(401, "unauthorized", str(exc) or "invalid token")
    if isinstance(exc, AdminDenied):
        if exc.reason == "unknown_tool":
            return APIError(404, "not_found", str(exc))
        return APIError(403, "forbidden", str(exc))
    if isinstance(exc, UnknownToolError):
        return APIError(404, "not_found", "unknown tool")
    if isinstance(exc, UnknownDiscoveryError):
        return APIError(404, "not_found", "unknown discovery")
    if isinstance(exc, ImportRefused):
        return APIError(409, "import_refused", str(exc))
    if isinstance(exc, CardError | CatalogFileError):
        return APIError(400, "invalid_catalog", str(exc))
    if isinstance(exc, QueryError | FormatError | ConfigError):
        return APIError(400, "invalid_request", str(exc))
    if isinstance(exc, StoreError):
        return APIError(503, "unavailable", "the catalog store is unavailable")
    return APIError(400, "invalid_request", str(exc))


#: documented error responses, for the OpenAPI document
def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    text = {
        400: "Invalid request",
        401: "Missing or invalid bearer token",
        403: "The caller may not administer this (tenant or platform administrator needed)",
        404: "Unknown tool (or not entitled: the same to the caller)",
        409: "The import changes protected tools (another source's, or widens access)",
        413: "Request body too large",
        422: "Request body does not match the schema",
        429: "Over a rate budget (the principal's, or its client's while its token fails)",
        503: "Store unavailable",
    }
    return {s: {"model": ErrorBody, "description": text[s]} for s in statuses}
