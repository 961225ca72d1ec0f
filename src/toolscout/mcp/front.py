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

:class:`Reader` is the reading (the early reader's after ``initialize``): it polls stdin
and a wake-up pipe, offers each complete line, keeps the rest; :meth:`Reader.handover`
(``serve_stdio``, once the SDK server is built) offers the complete lines already read,
stops, and leaves in ``read`` the bytes for the SDK: ``initialize``, the lines not
answered, any partial line, in order (the prefix ``mcp/pipes.py`` reads first).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from toolscout.mcp.meta import SEARCH, meta_tool_wire, result_wire
from toolscout.mcp.timeline import mark

if TYPE_CHECKING:
    from toolscout.mcp.server import MCPGateway

__all__ = ["LIST_CHANGED", "VERSIONS", "Front", "Reader", "Sent", "send_message"]

#: the protocol versions answered here (the handshake versions whose serialisation of
#: these results the tests hold equal to the SDK's)
VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
_PLAIN = frozenset({"_meta"})
#: what the SDK writes when a session's tool list changed (a dynamic search added tools)
LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
#: what answers a request early: (the message, the protocol version) → its result, or None
Sent = Callable[[dict[str, Any], str], dict[str, Any] | None]


class Front:
    """The answers of a gateway (its stored catalog open, the SDK not yet imported)."""

    def __init__(
        self, gateway: MCPGateway, notify: Callable[[dict[str, Any]], Any] | None = None
    ) -> None:
        self.gateway = gateway
        #: a notification to the client, before the answer (default: to stdout)
        self.notify = notify if notify is not None else send_message

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


class Reader:
    """The reader of the client's stdin after ``initialize``, until the SDK is up
    (:class:`~toolscout.mcp.early.Early`'s thread): each complete line is offered to the
    front (:meth:`arm`) or kept, in order and unchanged, for the SDK (:attr:`read`)."""

    read: bytes
    sent: dict[str, Any] | None
    _thread: threading.Thread

    def __init__(self) -> None:
        #: the methods of the requests answered after ``initialize``, in order
        self.answered: list[str] = []
        self._front: Sent | None = None
        self._armed = threading.Event()  # :meth:`arm` or :meth:`handover` said
        self._closing = False
        self._held = False  # a request went to the SDK: all after it do too (their order)
        #: the SDK is wanted now: a request left to it, the first search answered, stdin
        #: ended or the reading stopped (:meth:`sdk_wanted`)
        self._wanted = threading.Event()
        self._wake_r, self._wake_w = -1, -1

    def _open(self) -> None:
        self._wake_r, self._wake_w = os.pipe()

    def arm(self, front: Sent | None) -> None:
        """From now until :meth:`handover`, a request after ``initialize`` is offered to
        ``front`` (the message, the protocol version answered): its result is sent, or,
        for None, the message is kept for the SDK. ``front`` None: nothing is answered."""
        self._front = front
        self._armed.set()

    def sdk_wanted(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` seconds) until the SDK is wanted: a request was left
        to it, the first ``search_tools`` was answered here, or stdin ended; whether it
        is."""
        return self._wanted.wait(timeout)

    def handover(self) -> None:
        """Stop reading (the SDK is up): the lines read and not answered, and whatever
        was read of the next one, are in :attr:`read` when this returns. The complete
        lines already read are offered first (a client's burst is answered as one)."""
        self._closing = True
        self._armed.set()
        if self._wake_w >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")
        if self._thread.ident is not None:  # started
            self._thread.join()
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._wake_r = self._wake_w = -1

    def _follow(self, buf: bytes) -> None:
        """Read on after ``initialize``: each complete line offered (:meth:`_offer`),
        or kept for the SDK, until :meth:`handover` (or the end of stdin)."""
        kept: list[bytes] = []
        ended = False
        while True:
            while b"\n" in buf:  # every complete line read is offered, even once closing
                line, _, buf = buf.partition(b"\n")
                if not self._offer(line):
                    kept.append(line + b"\n")
            if self._closing or ended:
                break
            try:
                ready, _, _ = select.select([0, self._wake_r], [], [])
                if self._wake_r in ready or 0 not in ready:
                    break
                chunk = os.read(0, 65536)
            except OSError:
                break
            ended = not chunk
            buf += chunk
        self.read += b"".join(kept) + buf

    def _offer(self, line: bytes) -> bool:
        """Whether ``line`` was answered here (a request ``front`` answered, while no
        request before it was left to the SDK)."""
        if self._held:
            return False
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict) or "method" not in message:
            return False  # not a message for us: the SDK says so
        if "id" not in message:
            return False  # a notification: the SDK takes it (after what it has)
        id_ = message["id"]
        if (
            message.get("jsonrpc") != "2.0"
            or isinstance(id_, bool)
            or not isinstance(id_, int | str)
        ):
            self._held = True  # the SDK says what is wrong with it
            self._wanted.set()
            return False
        self._armed.wait()  # the catalog opening, or the SDK up
        front, sent = self._front, self.sent
        result = None
        if front is not None and sent is not None:
            try:
                result = front(message, sent["protocolVersion"])
            except Exception as exc:  # the SDK answers it instead
                with contextlib.suppress(OSError, ValueError):
                    print(
                        f"toolscout: {message['method']} not answered early "
                        f"({type(exc).__name__}: {exc}); the SDK answers it",
                        file=sys.stderr,
                        flush=True,
                    )
        if result is None or not send_message(
            {"jsonrpc": "2.0", "id": message["id"], "result": result}
        ):
            self._held = True
            self._wanted.set()
            return False
        self.answered.append(str(message["method"]))
        if message["method"] == "tools/call":
            self._wanted.set()
        return True


def send_message(message: dict[str, Any]) -> bool:
    """One JSON-RPC message to the client before the SDK is up (stdout, not yet the SDK's:
    written by the reader's thread alone); whether it went."""
    data = (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
    try:
        while data:
            data = data[os.write(1, data) :]
    except OSError:
        return False
    return True
