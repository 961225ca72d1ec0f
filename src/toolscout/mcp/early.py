"""Answering a stdio client's ``initialize`` while the gateway is still loading.

A desktop client spawns ``toolscout mcp serve`` at every start and waits for the answer
to ``initialize``; importing the MCP SDK (its pydantic models for every protocol version)
and the library takes seconds on a loaded machine. The answer itself does not depend on
any of that: it is the server's name, title and version, the gateway's capabilities and
its instructions for the listing mode, for the protocol version the client asked for
(:func:`initialize_result`, built here from the standard library alone).

When ``toolscout mcp serve`` starts over stdio (:func:`begin`, called by the command line
before it imports anything heavy), a thread reads the client's first message; if it is
``initialize``, the thread writes that answer at once. The message is then handed to the
SDK like any other (:meth:`Early.stdin`), so its session is initialised as usual, and the
SDK's own answer, still the truth, is compared with the one sent and not sent twice
(:class:`Recorder`): a difference is said on stderr. ``tests/test_mcp_early.py`` runs the
real SDK for every listing mode and every protocol version it supports and requires the
same answer, so an SDK that answers differently fails the tests before it ships.

After ``initialize`` the thread stays the reader of stdin until the SDK is up
(:meth:`Early.handover`): from the moment the stored catalog is open, the requests the
gateway can answer without the SDK are answered here (:meth:`Early.arm`, ``mcp/front.py``),
every other message is kept for the SDK, in order and unchanged.

An early answer never tells of an upstream: the SDK's answer names the instructions of
the upstreams the caller can see once they are connected, which at ``initialize`` on a
stdio start they are not (upstreams connect in the background).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from toolscout.mcp.front import Reader, Sent, send_message
from toolscout.mcp.timeline import mark

__all__ = [
    "HANDSHAKE_VERSIONS",
    "SERVER_INFO",
    "Early",
    "Recorder",
    "arm",
    "begin",
    "begun",
    "sdk_wanted",
    "initialize_result",
    "own_instructions",
    "take",
]

#: the protocol versions the SDK negotiates through ``initialize``, oldest to newest (a
#: client asking for another one gets the newest; the tests hold this to the SDK's list)
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: the gateway's ``serverInfo`` (the SDK server is built with the same)
SERVER_INFO = {"name": "toolscout", "title": "toolscout MCP gateway", "version": "0.1.0"}
#: what the gateway's handlers make the SDK declare on a handshake-era connection
_CAPABILITIES: dict[str, Any] = {
    "completions": {},
    "logging": {},
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": True},
    "tasks": {"cancel": {}, "list": {}, "requests": {"tools": {"call": {}}}},
    "tools": {"listChanged": True},
}
_MODES = ("auto", "meta", "dynamic", "direct")  # toolscout.mcp.config.MODES (tested equal)
_started: Early | None = None


def own_instructions(mode: str) -> str:
    """The gateway's own instructions for the listing ``mode``."""
    if mode == "direct":
        return "The tools of several MCP servers are listed here, as each caller may use them."
    if mode == "dynamic":
        return (
            "Many tools are behind this server. Use search_tools to find the ones for the "
            "task: the tools found are added to your tool list, to call directly."
        )
    own = (
        "Many tools are behind this server. Use search_tools to find the ones for the "
        "task (it returns their names and input schemas), then call_tool to run one."
    )
    return own + " With few tools, they are listed directly instead." if mode == "auto" else own


def initialize_result(requested: str, mode: str) -> dict[str, Any]:
    """The gateway's answer to ``initialize`` asking for protocol version ``requested``,
    in listing ``mode``, before any caller's upstream is known: what the SDK answers."""
    version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {
        "capabilities": json.loads(json.dumps(_CAPABILITIES)),  # a copy, nested too
        "instructions": own_instructions(mode),
        "protocolVersion": version,
        "serverInfo": dict(SERVER_INFO),
    }


def begin(argv: list[str]) -> Early | None:
    """For ``toolscout mcp serve`` over stdio (``argv`` is ``sys.argv``): start reading the
    client's first message and answer it if it is an ``initialize``. Anything else (or a
    config :func:`listing_mode` cannot read a mode from) returns None at once and changes
    nothing."""
    global _started
    args = argv[1:]
    if args[:2] != ["mcp", "serve"] or _transport(args[2:]) != "stdio":
        return None
    config = _option(args[2:], "--config", "-c")
    if config is None or sys.stdin is None or sys.stdin.isatty():
        return None
    mode = listing_mode(Path(config), args[2:])
    if mode is None:
        return None
    early = Early(mode)
    early.start()
    _started = early
    return early


def begun() -> bool:
    """Whether :func:`begin` started reading this process's stdin (not taken yet)."""
    return _started is not None


def arm(front: Sent | None) -> None:
    """Offer the requests after ``initialize`` to ``front`` until the SDK is up
    (:meth:`Early.arm`; nothing when :func:`begin` did not start reading)."""
    if _started is not None:
        _started.arm(front)


def sdk_wanted(timeout: float) -> None:
    """:meth:`Early.sdk_wanted` (at once when :func:`begin` did not start reading)."""
    if _started is not None:
        _started.sdk_wanted(timeout)


def take() -> Early | None:
    """What :func:`begin` started in this process, once (the gateway serving stdio)."""
    global _started
    early, _started = _started, None
    return early


def _option(args: list[str], *names: str) -> str | None:
    for i, arg in enumerate(args):
        if arg in names and i + 1 < len(args):
            return args[i + 1]
        for name in names:
            if name.startswith("--") and arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def _transport(args: list[str]) -> str:
    return _option(args, "--transport", "-t") or "stdio"


def listing_mode(config: Path, args: list[str]) -> str | None:
    """The listing mode the gateway will serve (``--mode``, else ``toolscout.mode``, else
    ``auto``); None when the config cannot be read, is not a JSON object or names no
    known mode (the command says what is wrong with it)."""
    try:
        data = json.loads(config.read_bytes())
    except (OSError, ValueError):
        return None
    section = data.get("toolscout", {}) if isinstance(data, dict) else None
    if not isinstance(section, dict):
        return None
    mode = _option(args, "--mode") or section.get("mode", "auto")
    return mode if mode in _MODES else None


def _valid_params(params: Any) -> bool:
    """Whether ``initialize``'s params have the fields the SDK requires, of their types."""
    if not isinstance(params, dict) or not isinstance(params.get("protocolVersion"), str):
        return False
    client = params.get("clientInfo")
    return (
        isinstance(params.get("capabilities"), dict)
        and isinstance(client, dict)
        and isinstance(client.get("name"), str)
        and isinstance(client.get("version"), str)
    )


class Early(Reader):
    """The client's first message, read (and ``initialize`` answered) on a thread while
    the rest of the gateway loads; once answered, the reader of the client's stdin until
    the SDK is up (:meth:`handover`): a request the gateway can answer without the SDK
    (:meth:`arm`, ``mcp/front.py``) is answered here, every other message is kept, in
    order and unchanged, for the SDK."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        #: the bytes for the SDK: every byte read from stdin but the lines answered here
        #: (complete once :meth:`handover` returned)
        self.read = b""
        self.request: dict[str, Any] | None = None  # the first message, if initialize
        self.sent: dict[str, Any] | None = None  # the result answered early, if any
        self._thread = threading.Thread(target=self._first, name="toolscout-early", daemon=True)
        Reader.__init__(self)

    def start(self) -> None:
        self._open()
        self._thread.start()

    def wait(self) -> None:
        """Until the client's first message is read (and answered, when it can be)."""
        self._thread.join()

    def _first(self) -> None:
        buf = b""
        try:
            while b"\n" not in buf:
                chunk = os.read(0, 65536)
                if not chunk:
                    break
                buf += chunk
        except OSError:
            pass
        self.read = buf
        mark("first message read")
        line, _, rest = buf.partition(b"\n")
        if self._initialize(line) and b"\n" in buf:
            self.read = line + b"\n"
            self._follow(rest)
        self._wanted.set()  # nothing more is read here

    def _initialize(self, line: bytes) -> bool:
        """Answer the first line if it is an ``initialize`` the SDK would accept; whether
        it was answered."""
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("method") != "initialize":
            return False
        if "id" not in message:
            return False
        self.request = message
        params = message.get("params")
        if not isinstance(params, dict) or not _valid_params(params):
            return False  # the SDK says what is wrong with it
        result = initialize_result(params["protocolVersion"], self.mode)
        if not send_message({"jsonrpc": "2.0", "id": message["id"], "result": result}):
            return False
        self.sent = result
        mark("initialize answered early")
        return True

    def stdin(self) -> Any:
        """The client's messages for the SDK, as an async text file: what the thread read,
        then the rest of stdin (fd 0 is moved to a private descriptor and pointed at the
        null device, as the SDK does with a stdin it claims itself)."""
        import anyio

        private = os.dup(0)
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        raw = _Prefixed(self.read, private)
        text = io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8", errors="replace")
        return anyio.wrap_file(text)


class _Prefixed(io.RawIOBase):
    """Bytes already read, then a descriptor."""

    def __init__(self, prefix: bytes, fd: int) -> None:
        super().__init__()
        self._prefix = prefix
        self._fd = fd

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = os.read(self._fd, len(buffer))
        buffer[: len(data)] = data
        return len(data)


class Recorder:
    """The SDK's write stream, with its answer to the first ``initialize`` compared with
    the one sent early and, when the client was answered early, not sent a second time."""

    def __init__(
        self, stream: Any, early: Early, errlog: Any = None, own: str | None = None
    ) -> None:
        self._stream = stream
        self._early = early
        self._errlog = errlog
        self._own = own
        self._pending = early.request is not None

    async def send(self, item: Any, /) -> None:
        if self._pending:
            answer = self._initialize_answer(item)
            if answer is not None:
                self._pending = False
                mark("initialize answered by the SDK")
                sent = self._early.sent
                if sent is not None:
                    if not _same(sent, answer, self._own):
                        self._say(
                            "the initialize answer sent early differs from the SDK's "
                            f"(sent {json.dumps(sent, sort_keys=True)}; the SDK's "
                            f"{json.dumps(answer, sort_keys=True)})"
                        )
                    return
        await self._stream.send(item)

    def _say(self, what: str) -> None:
        if self._errlog is not None:
            print(f"toolscout: {what}", file=self._errlog, flush=True)

    def _initialize_answer(self, item: Any) -> dict[str, Any] | None:
        """The SDK's answer to the first message (an error as ``{"error": ...}``)."""
        request = self._early.request
        message = getattr(item, "message", None)
        if request is None or message is None or not hasattr(message, "model_dump"):
            return None
        dumped = message.model_dump(by_alias=True, exclude_unset=True, mode="json")
        if not isinstance(dumped, dict) or dumped.get("id") != request.get("id"):
            return None
        if "result" not in dumped:
            return {"error": dumped.get("error")} if "error" in dumped else None
        result = dumped["result"]
        return result if isinstance(result, dict) else None

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> Recorder:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._stream.__aexit__(*exc)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _same(sent: dict[str, Any], answer: dict[str, Any], own: str | None) -> bool:
    """Whether the SDK's ``answer`` is the one ``sent`` early, but for the instructions of
    upstreams connected before the SDK answered (an early answer never tells of them)."""
    if sent == answer:
        return True
    told = answer.get("instructions")
    if own is None or not isinstance(told, str) or not told.startswith(own + "\n\n["):
        return False
    return sent == {**answer, "instructions": own}
