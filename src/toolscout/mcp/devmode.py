"""``toolscout mcp serve --transport http --dev``: the gateway as the MCP Inspector reaches it.

The published Inspector connects to ``/mcp`` in two ways: its CLI and its proxy are Node
processes (no ``Origin``, no token unless given ``--header``); its web UI in direct mode
is a page on ``http://localhost:6274`` that posts from the browser, so it first sends a
CORS preflight (``OPTIONS`` naming ``content-type``, ``mcp-protocol-version``,
``mcp-session-id`` and, when set, ``authorization``) and must be allowed to read the
``mcp-session-id`` response header. Development mode serves exactly that and nothing more:

* it listens on a loopback address only (:data:`LOOPBACK`; any other ``--host`` is
  refused), and the MCP SDK's DNS-rebinding guard stays on (``Host`` and ``Origin`` must
  be loopback: a page on another site cannot drive it);
* a request without ``Authorization`` is the config's ``toolscout.principal``, else the
  local user with each server's own scope (as over stdio; one stderr line says so); a
  request with a bearer token is still verified (when ``jwt_key`` is set) and is that caller;
* CORS answers only the Inspector's own origins (:data:`INSPECTOR_ORIGINS`).

Without ``--dev`` nothing changes: every HTTP request needs a verified bearer token.
A config file cannot turn development mode on; only the command-line flag does.
"""

from __future__ import annotations

from typing import Any

from toolscout.errors import ConfigError

#: the addresses development mode may listen on
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: where the Inspector's web UI runs (its default client port, 6274)
INSPECTOR_ORIGINS = ("http://localhost:6274", "http://127.0.0.1:6274")
#: request headers the Inspector's browser client sends to ``/mcp``
ALLOW_HEADERS = (
    "accept",
    "authorization",
    "content-type",
    "last-event-id",
    "mcp-protocol-version",
    "mcp-session-id",
)
#: response headers it must be able to read
EXPOSE_HEADERS = ("mcp-session-id", "mcp-protocol-version", "www-authenticate")


def check_host(host: str) -> None:
    """Raise :class:`ConfigError` unless ``host`` is a loopback address."""
    if host not in LOOPBACK:
        raise ConfigError(
            f"--dev listens on a loopback address only ({', '.join(LOOPBACK)}), not {host!r}; "
            "to serve other machines drop --dev and give callers tokens (toolscout.jwt_key)"
        )


def dev_app(server: Any, *, host: str) -> Any:
    """The streamable-HTTP app of ``server`` without the bearer-token wall (the gateway
    decides each caller itself), behind CORS for the Inspector's origins only."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.middleware.cors import CORSMiddleware

    check_host(host)
    guard = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )
    app = server.streamable_http_app(host=host, transport_security=guard)
    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(INSPECTOR_ORIGINS),
        allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
        allow_headers=list(ALLOW_HEADERS),
        expose_headers=list(EXPOSE_HEADERS),
        max_age=600,
    )
    return app


def banner(url: str, subject: str) -> str:
    """The stderr lines development mode starts with: the URL and how to inspect it."""
    return (
        f"toolscout MCP gateway (development mode: loopback only; requests without a token "
        f"act as {subject!r}) on {url}\n"
        f"  inspect it: npx @modelcontextprotocol/inspector --cli {url} --transport http "
        "--method tools/list\n"
        f"  or open the Inspector (npx @modelcontextprotocol/inspector), transport "
        f"Streamable HTTP, URL {url}"
    )
