"""Answering a stdio client's ``initialize`` while the gateway is still loading.

A desktop client spawns ``toolscout mcp serve`` at every start and waits for the answer
to ``initialize``; importing the MCP SDK (its pydantic models for every protocol version)
and the library takes seconds on a loaded machine. The answer itself does not depend on
any of that: it is the server's name, version, instructions and capabilities for the
protocol version the client asked for, fixed by the config, toolscout and the SDK.

So the gateway keeps the answer the SDK gave, beside its stored catalog, under a key made
of the config file's bytes, the command's arguments, the interpreter and the sources that
build the answer. When ``toolscout mcp serve`` starts over stdio (:func:`begin`, called by
the command line before it imports anything heavy), a thread reads the client's first
message; if it is ``initialize`` and an answer is kept for its protocol version under the
same key, the thread writes that answer at once. The message is then handed to the SDK
like any other (:meth:`Early.stdin`), so its session is initialised as usual, and the
SDK's own answer is compared with the one sent and not sent twice (:class:`Recorder`): a
difference is said on stderr and kept for the next start.

A first start of a config (no stored catalog yet, so no answer beside it) is answered from
the answer an earlier start of the same toolscout kept under the user cache dir
(:func:`shared_path`, :func:`shared_key`) when what the answer is made of is the same: the
listing mode, of the config (the gateway's own instructions are the mode's; its name and
capabilities are fixed by its sources and the SDK's; an answer naming an upstream's
instructions is never kept). It is checked against the SDK's answer the same way. Without
either (the first start of this toolscout, SDK or interpreter in this mode) nothing is
answered early: the SDK answers, and its answer is kept. Only the standard library (and
``platformdirs``) is imported here.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from toolscout.mcp.timeline import mark

__all__ = ["Early", "Recorder", "begin", "take"]

#: the sources whose change can change the answer (besides the SDK's, stat-ed)
_OWN_SOURCES = ("server.py", "tasks.py", "early.py", "config.py")
_SDK_SOURCES = ("server/runner.py", "server/lowlevel/server.py", "__init__.py")
#: top-level packages of the SDK whose files are stat-ed into the keys
_SDK_PACKAGES = ("mcp", "mcp_types")
_started: Early | None = None


def begin(argv: list[str]) -> Early | None:
    """For ``toolscout mcp serve`` over stdio (``argv`` is ``sys.argv``): start reading the
    client's first message and answer it if it is an ``initialize`` answered before.
    Anything else returns None at once and changes nothing."""
    global _started
    args = argv[1:]
    if args[:2] != ["mcp", "serve"] or _transport(args[2:]) != "stdio":
        return None
    config = _option(args[2:], "--config", "-c")
    if config is None or sys.stdin is None or sys.stdin.isatty():
        return None
    try:
        early = Early(Path(config), args[2:])
    except OSError:  # an unreadable config: the command says so
        return None
    early.start()
    _started = early
    return early


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


def answers_path(config: Path, args: list[str]) -> Path:
    """Where the answers for ``config`` are kept: beside the catalog file it names (or
    ``--db`` does), else beside the default stored catalogs under the user data dir."""
    db = _option(args, "--db")
    if db is None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            named = json.loads(config.read_bytes()).get("toolscout", {}).get("db")
            if isinstance(named, str) and named:
                db = str(config.parent / named) if not Path(named).is_absolute() else named
    if db is not None and db != ":memory:" and "://" not in db:
        return Path(db).with_name(Path(db).name + ".initialize.json")
    from platformdirs import user_data_dir

    digest = hashlib.sha256(str(config.resolve()).encode()).hexdigest()[:16]
    return Path(user_data_dir("toolscout", appauthor=False)) / "mcp" / f"initialize-{digest}.json"


def answer_key(config: Path, args: list[str]) -> str:
    """A digest of everything the ``initialize`` answer is made from."""
    digest = hashlib.sha256(config.read_bytes())
    digest.update(json.dumps([args, sys.executable, sys.version]).encode())
    digest.update(_software())
    return digest.hexdigest()


def shared_path(key: str) -> Path:
    """Where the answers kept by any start under the shared ``key`` live (one file per key,
    under the user cache dir)."""
    from platformdirs import user_cache_dir

    cache = Path(user_cache_dir("toolscout", appauthor=False))
    return cache / "mcp" / f"initialize-{key[:24]}.json"


def shared_key(config: Path, args: list[str]) -> str | None:
    """A digest of what the answer is made from, but of the config only its listing mode
    (``--mode``, else ``toolscout.mode``, else ``auto``); None when the config cannot be
    read as a JSON object (the command says what is wrong with it)."""
    mode = _option(args, "--mode")
    if mode is None:
        try:
            data = json.loads(config.read_bytes())
        except (OSError, ValueError):
            return None
        section = data.get("toolscout", {}) if isinstance(data, dict) else None
        if not isinstance(section, dict):
            return None
        mode = section.get("mode", "auto")
    if not isinstance(mode, str):
        return None
    digest = hashlib.sha256(b"shared-1")
    digest.update(json.dumps([mode, sys.executable, sys.version]).encode())
    digest.update(_software())
    return digest.hexdigest()


def _software() -> bytes:
    """The gateway's sources that build the answer, and the SDK's files (stat-ed)."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in _OWN_SOURCES:
        digest.update((here / name).read_bytes())
    import importlib.util

    for package in _SDK_PACKAGES:
        found = importlib.util.find_spec(package)  # a top-level package: found, not imported
        roots = list(found.submodule_search_locations or []) if found is not None else []
        for root in roots:
            for name in _SDK_SOURCES:
                with contextlib.suppress(OSError):
                    st = (Path(root) / name).stat()
                    digest.update(f"{package}/{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.digest()


def _read_answers(path: Path, key: str) -> dict[str, dict[str, Any]]:
    """The kept answers by requested protocol version (none if the key differs or the file
    is not exactly their shape: answered by the SDK then, and kept again)."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("key") != key:
        return {}
    answers = data.get("answers")
    if not isinstance(answers, dict):
        return {}
    return {v: r for v, r in answers.items() if isinstance(v, str) and _is_answer(r)}


def _is_answer(result: Any) -> bool:
    return (
        isinstance(result, dict)
        and isinstance(result.get("protocolVersion"), str)
        and isinstance(result.get("capabilities"), dict)
        and isinstance(result.get("serverInfo"), dict)
    )


class Early:
    """The client's first message, read (and ``initialize`` answered from a kept answer)
    on a thread while the rest of the gateway loads."""

    def __init__(self, config: Path, args: list[str]) -> None:
        self.path = answers_path(config, args)
        self.key = answer_key(config, args)
        self.answers = _read_answers(self.path, self.key)
        #: answers kept by any start of this toolscout in the same mode (a first start's)
        self.shared_key = shared_key(config, args)
        self.shared: dict[str, dict[str, Any]] = {}
        if self.shared_key is not None:
            with contextlib.suppress(OSError, ValueError):
                self.shared = _read_answers(shared_path(self.shared_key), self.shared_key)
        #: where the answer sent early came from: "kept" (this config's) or "shared"
        self.source = ""
        self.read = b""  # every byte read from stdin (the first line, and what followed)
        self.request: dict[str, Any] | None = None  # the first message, if initialize
        self.sent: dict[str, Any] | None = None  # the result answered early, if any
        self._thread = threading.Thread(target=self._first, name="toolscout-early", daemon=True)

    def start(self) -> None:
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
        line = buf.split(b"\n", 1)[0]
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict) or message.get("method") != "initialize":
            return
        if "id" not in message:
            return
        self.request = message
        params = message.get("params")
        version = params.get("protocolVersion") if isinstance(params, dict) else None
        if not isinstance(version, str):
            return
        result, source = self.answers.get(version), "kept"
        if result is None:
            result, source = self.shared.get(version), "shared"
        if result is None:
            return
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        data = (json.dumps(reply, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        try:
            while data:
                data = data[os.write(1, data) :]
        except OSError:
            return
        self.sent, self.source = result, source
        mark(f"initialize answered early ({source} answer)")

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

    def keep(self, result: dict[str, Any], own: str | None = None) -> None:
        """Keep the SDK's answer to the first ``initialize`` for the next start.

        With ``own`` (the gateway's own instructions), an answer whose instructions say
        more (an upstream's, which depend on what this caller may see under the policy
        of the moment) is not kept: an early answer never tells of an upstream."""
        if self.request is None or not _is_answer(result):
            return
        if own is not None and result.get("instructions") not in (None, own):
            return
        params = self.request.get("params")
        version = params.get("protocolVersion") if isinstance(params, dict) else None
        if not isinstance(version, str):
            return
        if self.answers.get(version) != result and _write(self.path, self.key, self.answers,
                                                         version, result):  # fmt: skip
            self.answers = {**self.answers, version: result}
        if self.shared_key is None or self.shared.get(version) == result:
            return
        with contextlib.suppress(OSError, ValueError):
            if _write(shared_path(self.shared_key), self.shared_key, self.shared, version, result):
                self.shared = {**self.shared, version: result}


def _write(
    path: Path, key: str, answers: dict[str, dict[str, Any]], version: str, result: Any
) -> bool:
    """Keep ``result`` for ``version`` (with ``answers``) under ``key`` in ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": key, "answers": {**answers, version: result}}))
        os.replace(tmp, path)
    except OSError:  # a cache: the next start answers through the SDK
        return False
    return True


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
    """The SDK's write stream, with its answer to the first ``initialize`` kept for the
    next start and, when the client was answered early, not sent a second time."""

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
                self._early.keep(answer, self._own)
                if sent is not None:
                    if sent != answer and self._errlog is not None:
                        print(
                            "toolscout: the initialize answer sent from the last start "
                            "differs from this one's; kept for the next start",
                            file=self._errlog,
                        )
                    return
        await self._stream.send(item)

    def _initialize_answer(self, item: Any) -> dict[str, Any] | None:
        request = self._early.request
        message = getattr(item, "message", None)
        if request is None or message is None or not hasattr(message, "model_dump"):
            return None
        dumped = message.model_dump(by_alias=True, exclude_unset=True, mode="json")
        if not isinstance(dumped, dict) or "result" not in dumped:
            return None
        if dumped.get("id") != request.get("id"):
            return None
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
