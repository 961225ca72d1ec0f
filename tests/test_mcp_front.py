"""``toolscout mcp serve`` over stdio answers ``tools/list``, ``search_tools`` and ``ping``
from the stored catalog before the MCP SDK is up (``mcp/front.py``), exactly as the SDK's
path answers them; everything else reaches the SDK in order, unchanged, once.

The early answers are held to the real SDK's serialisation for every protocol version
answered early and every listing mode, in the same gateway state; then driven over a real
pipe with raw JSON-RPC lines (the SDK client would hide a second answer) and with the
real SDK client (initialize, tools/list, a search, a forwarded call, later searches)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from _mcp_kit import forked_py_server, py_server
from _mcp_kit import initialize_request as _initialize
from toolscout.cards import make_spec
from toolscout.mcp.config import MODES, load_config
from toolscout.mcp.early import HANDSHAKE_VERSIONS, Early
from toolscout.mcp.front import VERSIONS, Front
from toolscout.mcp.server import MCPGateway

WAIT_S = 120.0
_NOTE = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _request(id_: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return message


def _search(id_: int, query: str, **more: Any) -> dict[str, Any]:
    arguments = {"query": query, **more}
    return _request(id_, "tools/call", {"name": "search_tools", "arguments": arguments})


# -- the early answers are the SDK's ---------------------------------------------------


async def _sdk_answers(gateway: MCPGateway, messages: list[dict[str, Any]]) -> list[Any]:
    """``messages`` put to the gateway's SDK server over in-memory streams; what it wrote
    (as the stdio transport dumps it), one answer per request."""
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCNotification, JSONRPCRequest

    send_in, recv_in = anyio.create_memory_object_stream[Any](16)
    send_out, recv_out = anyio.create_memory_object_stream[Any](16)
    got: list[dict[str, Any]] = []
    wanted = len([m for m in messages if "id" in m])
    async with send_in, recv_in, send_out, recv_out, anyio.create_task_group() as tg:
        options = gateway.server.create_initialization_options()
        tg.start_soon(gateway.server.run, recv_in, send_out, options)
        for message in messages:
            kind = JSONRPCRequest if "id" in message else JSONRPCNotification
            await send_in.send(SessionMessage(kind.model_validate(message)))
        with anyio.fail_after(WAIT_S):
            while len(got) < wanted:
                item = await recv_out.receive()
                dumped = item.message.model_dump(by_alias=True, exclude_unset=True, mode="json")
                got.append(dumped)  # a notification too (a dynamic search's list_changed)
                wanted += "id" not in dumped
        tg.cancel_scope.cancel()
    return got


def _stored_gateway(tmp: Path, mode: str, tools: int) -> MCPGateway:
    """A gateway over a stored catalog of ``tools`` tools of its one server (not started),
    as a stored start finds it."""
    path = tmp / f"{mode}-{tools}.json"
    servers = {"time": {"command": py_server("mcp-server-time"), "toolscout": {"scopes": ["t"]}}}
    section = {
        "mode": mode,
        "db": str(tmp / f"{mode}-{tools}.db"),
        "principal": {"subject": "me", "scopes": ["t"]},
    }
    path.write_text(json.dumps({"mcpServers": servers, "toolscout": section}))
    gateway = MCPGateway(load_config(path))
    subjects = ["weather", "invoice", "calendar", "ticket", "repository", "email", "payment"]
    specs = [
        make_spec(
            {
                "id": f"time/{subject}_{i}",
                "name": f"{subject}_{i}",
                "summary": f"Look up the {subject} record number {i} by its identifier.",
                "scopes": ["t"],
                "source": "mcp:time",
                "parameters": {
                    "type": "object",
                    "properties": {"id": {"type": "string", "description": "Its identifier."}},
                    "required": ["id"],
                },
            }
        )
        for i in range(tools)
        for subject in subjects[i % len(subjects) : i % len(subjects) + 1]
    ]
    gateway.ts.catalog.add(specs)
    gateway._stored = gateway._stored_servers()[1]
    return gateway


def _masked(answer: dict[str, Any]) -> dict[str, Any]:
    """A search's answer with its discovery id (one per discovery) masked."""
    text = json.loads(answer["content"][0]["text"])
    assert isinstance(text.pop("discovery_id"), str)
    structured = dict(answer["structuredContent"])
    assert structured.pop("discovery_id") == answer_id(answer)
    return {
        **answer,
        "content": [{**answer["content"][0], "text": text}],
        "structuredContent": structured,
    }


def answer_id(answer: dict[str, Any]) -> str:
    return str(json.loads(answer["content"][0]["text"])["discovery_id"])


@pytest.mark.parametrize(
    ("mode", "tools"), [(m, 12) for m in MODES] + [("auto", 4), ("dynamic", 20)]
)
def test_the_early_answers_are_the_sdks(tmp_path: Path, mode: str, tools: int) -> None:
    """In the same gateway state (the caller's own state cleared before each path), the
    early answers and notifications are the SDK's, per protocol version."""
    gateway = _stored_gateway(tmp_path, mode, tools)
    notes: list[dict[str, Any]] = []
    front = Front(gateway, notify=notes.append)
    try:
        for version in HANDSHAKE_VERSIONS:
            messages = [
                _initialize(version),
                _NOTE,
                _request(2, "tools/list"),
                _request(3, "ping"),
                _search(4, "look up the weather record"),
            ]
            gateway._callers.clear()
            written = anyio.run(_sdk_answers, gateway, messages)
            answers = sorted((m for m in written[1:] if "id" in m), key=lambda m: int(m["id"]))
            sdk = [m["result"] for m in answers]
            sdk_notes = [m for m in written if "id" not in m]
            # the list after the search (in dynamic: what the search added), on its own
            # (the SDK serves a connection's requests concurrently)
            again = [*messages[:2], _request(5, "tools/list")]
            sdk.append(anyio.run(_sdk_answers, gateway, again)[1]["result"])
            gateway._callers.clear()
            notes.clear()
            ours = [front(m, version) for m in [*messages[2:], again[2]]]
            if version not in VERSIONS:
                assert ours == [None] * 4 and not notes  # left to the SDK
                continue
            listed, searched = ours[0], ours[2]
            assert listed is not None and searched is not None
            assert [ours[0], ours[1], ours[3]] == [sdk[0], sdk[1], sdk[3]], (mode, version)
            assert _masked(searched) == _masked(sdk[2]), (mode, version)
            assert answer_id(searched) != answer_id(sdk[2])  # each recorded once, its own
            assert notes == sdk_notes, (mode, version)
            assert bool(notes) == (mode == "dynamic")  # the tools found were new to the list
            assert len(sdk[0]["tools"]) == len(listed["tools"]) >= 2
            if (mode, tools) == ("dynamic", 20):  # the search's tools are listed next
                assert len(sdk[3]["tools"]) > len(sdk[0]["tools"]) == 2
    finally:
        gateway.close()


def test_what_the_sdks_path_would_refuse_or_treat_otherwise_is_left_to_it(
    tmp_path: Path,
) -> None:
    gateway = _stored_gateway(tmp_path, "meta", 12)
    front = Front(gateway)
    try:
        version = VERSIONS[-1]
        for message in (
            _search(2, ""),  # the SDK's path answers its own error
            _search(2, "weather", k=11),
            _search(2, "weather", extra=1),
            _request(2, "tools/call", {"name": "call_tool", "arguments": {"name": "x"}}),
            _request(2, "tools/call", {"name": "search_tools", "arguments": []}),
            _request(2, "tools/call", {"name": "search_tools", "task": {}}),
            _request(2, "tools/list", {"cursor": "x"}),
            _request(2, "tools/list", []),  # type: ignore[arg-type]
            _request(2, "resources/list"),
            _request(2, "ping", {"_meta": "x"}),
        ):
            assert front(message, version) is None, message
        assert front(_request(2, "ping", {"_meta": {"progressToken": 1}}), version) == {}
        assert front(_search(2, "weather"), "2099-01-01") is None
    finally:
        gateway.close()


# -- over a real pipe ---------------------------------------------------------------


def _config(tmp: Path, mode: str = "meta") -> Path:
    path = tmp / "servers.json"
    # the gateway starts cold (what these tests are about); its upstream, the published
    # time server, is forked (fork_kit): a process of its own on the gateway's pipes
    time_server = forked_py_server("mcp-server-time", toolscout={"scopes": ["t"]})
    servers = {"time": time_server}
    section = {"mode": mode, "principal": {"subject": "me", "scopes": ["t"]}}
    path.write_text(json.dumps({"mcpServers": servers, "toolscout": section}))
    return path


class _Gateway:
    """``toolscout mcp serve`` spawned over pipes, spoken to in raw JSON-RPC lines."""

    def __init__(self, config: Path, db: Path) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(sys.path),
            "XDG_CACHE_HOME": str(config.parent / "cache"),
            "TOOLSCOUT_TIMELINE": "1",
            # the SDK's import waits for the first early search however loaded the machine
            # (a request left to the SDK or the end of stdin still starts it at once)
            "TOOLSCOUT_SDK_WAIT_S": "600",
        }
        command = [sys.executable, "-m", "toolscout", "mcp", "serve", "-c", str(config)]
        self.proc = subprocess.Popen(
            [*command, "--db", str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.got: list[dict[str, Any]] = []
        self._lines: queue.Queue[bytes | None] = queue.Queue()  # None: stdout ended
        out = self.proc.stdout
        assert out is not None
        threading.Thread(target=self._pump, args=(out,), daemon=True).start()

    def _pump(self, out: Any) -> None:
        for line in out:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, *messages: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        self.proc.stdin.flush()

    def until(self, wanted: int) -> dict[str, Any]:
        while not any(m.get("id") == wanted for m in self.got):
            line = self._lines.get(timeout=WAIT_S)
            assert line is not None, f"stdout ended before an answer to {wanted}"
            self.got.append(json.loads(line))
        return next(m for m in self.got if m.get("id") == wanted)

    def close(self) -> str:
        """Stdin closed, the gateway gone; its stderr (the timeline)."""
        assert self.proc.stdin is not None and self.proc.stderr is not None
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=WAIT_S)
            while True:  # what it wrote before its stdout closed (None: closed)
                try:
                    line = self._lines.get(timeout=WAIT_S)
                except queue.Empty:  # a child still holding the pipe: what came is all
                    break
                if line is None:
                    break
                self.got.append(json.loads(line))
            return self.proc.stderr.read().decode()
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()


def _first_start(config: Path, db: Path) -> None:
    """A first start: the time server indexed into the stored catalog."""
    gw = _Gateway(config, db)
    gw.send(_initialize(), _NOTE, _request(2, "tools/list"))
    assert "tools" in gw.until(2)["result"]
    err = gw.close()
    assert "answered early" in err and "tools/list answered early" not in err  # nothing stored


@pytest.fixture(scope="module")
def first_started(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """What a first start leaves (:func:`_first_start`: the time server indexed into the
    stored catalog), made once per listing mode for the module and copied into each test's
    directory (the catalog, its audit log and dense files, the cache): the tests start
    from a stored catalog, as they did after a first start of their own. Returns the
    copy's config; its catalog is ``c.db`` beside it."""
    made: dict[str, Path] = {}

    def copy(into: Path, mode: str = "meta") -> Path:
        if mode not in made:
            where = tmp_path_factory.mktemp(f"first-start-{mode}")
            _first_start(_config(where, mode), where / "c.db")
            made[mode] = where
        shutil.copytree(made[mode], into, dirs_exist_ok=True)
        return _config(into, mode)

    return copy


def _log(db: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """The discovery log: the discoveries' ids, and each call's (tool, discovery id)."""
    import sqlite3

    with sqlite3.connect(db) as con:
        found = [row[0] for row in con.execute("SELECT id FROM discoveries ORDER BY ts")]
        calls = list(con.execute("SELECT tool_id, discovery_id FROM calls ORDER BY ts"))
    return found, calls


def test_a_stored_start_answers_the_list_and_the_first_search_before_the_sdk(
    tmp_path: Path,
    first_started: Callable[..., Path],
) -> None:
    """Over a real pipe: the list and the first search answered early, once each; the
    forwarded call and the later search served by the SDK's path, which links the call to
    the early search (the caller's state is the gateway's); the log records each search
    once."""
    config, db = first_started(tmp_path), tmp_path / "c.db"
    gw = _Gateway(config, db)
    gw.send(_initialize(), _NOTE, _request(2, "tools/list"), _search(3, "what time is it"))
    listed = gw.until(2)["result"]["tools"]
    assert [t["name"] for t in listed] == ["search_tools", "call_tool"]
    first = gw.until(3)["result"]
    found = json.loads(first["content"][0]["text"])
    assert found["tools"][0]["name"] == "get_current_time" and "still indexing" in found["indexing"]
    assert first["structuredContent"] == found
    call = {"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}
    gw.send(_request(4, "tools/call", call))
    assert "Asia/Tokyo" in gw.until(4)["result"]["content"][0]["text"]
    gw.send(_request(5, "ping"), _search(6, "convert a time between zones"))
    assert gw.until(5)["result"] == {}
    later = json.loads(gw.until(6)["result"]["content"][0]["text"])
    assert later["tools"][0]["name"] == "convert_time"
    err = gw.close()
    answers = [m["id"] for m in gw.got if "id" in m]
    assert sorted(answers) == [1, 2, 3, 4, 5, 6]  # each request answered once
    sdk = err.split("MCP SDK imported")[1]
    assert "first tools/list answered early" in err and "first search_tools answered early" in err
    assert "first tools/list answered" not in err.replace("answered early", "")
    # the later search went through the SDK's path, the first did not
    assert err.count("first search_tools answered") == 2 and "differs" not in err
    assert "serving stdio" in sdk
    discoveries, calls = _log(db)
    assert discoveries == [found["discovery_id"], later["discovery_id"]]  # once each
    assert calls == [("time/get_current_time", found["discovery_id"])]


def test_a_request_left_to_the_sdk_keeps_the_order_of_those_after_it(
    tmp_path: Path, first_started: Callable[..., Path]
) -> None:
    """A request the front does not answer (here ``resources/list``) goes to the SDK, and
    so does everything after it, in order: the list and the search come from the SDK."""
    config, db = first_started(tmp_path), tmp_path / "c.db"
    gw = _Gateway(config, db)
    gw.send(
        _initialize(),
        _NOTE,
        _request(2, "resources/list"),
        _request(3, "tools/list"),
        _search(4, "what time is it"),
    )
    for id_ in (2, 3, 4):
        assert "result" in gw.until(id_)
    err = gw.close()
    assert sorted(m["id"] for m in gw.got if "id" in m) == [1, 2, 3, 4]
    assert "answered early" in err and "tools/list answered early" not in err
    assert "search_tools answered early" not in err
    discoveries, _ = _log(db)
    assert len(discoveries) == 1


def test_a_dynamic_search_answered_early_tells_the_list_changed(
    tmp_path: Path, first_started: Callable[..., Path]
) -> None:
    """A ``dynamic`` search changes what the session lists: answered early, the tools it
    found are added to the caller's list (the gateway's own state, which the SDK's session
    then serves) and ``tools/list_changed`` is written before the answer, as the SDK's path
    does. Here every tool fits in the dynamic list (two tools), so the SDK's later list
    is the same."""
    config, db = first_started(tmp_path, "dynamic"), tmp_path / "c.db"
    gw = _Gateway(config, db)
    gw.send(_initialize(), _NOTE, _request(2, "tools/list"), _search(3, "what time is it"))
    first = gw.until(2)["result"]["tools"]
    found = json.loads(gw.until(3)["result"]["content"][0]["text"])
    assert found["tools"]
    gw.send(_request(4, "resources/list"), _request(5, "tools/list"))
    assert gw.until(5)["result"]["tools"] == first
    err = gw.close()
    assert "first tools/list answered early" in err and "search_tools answered early" in err
    kinds = [m.get("method", m.get("id")) for m in gw.got]
    assert kinds.index("notifications/tools/list_changed") < kinds.index(3)


def test_the_reader_hands_on_what_it_did_not_answer(tmp_path: Path) -> None:
    """In process, over an OS pipe: the bytes not answered, in order, unchanged (a partial
    line too), once the reader is handed over."""
    read, write = os.pipe()
    out_r, out_w = os.pipe()
    saved, saved_out = os.dup(0), os.dup(1)
    os.dup2(read, 0)
    os.dup2(out_w, 1)  # before the reader starts: it answers initialize at once
    try:
        reader = Early("meta")
        reader.start()
        unanswered = [json.dumps(_request(2, "resources/list")), json.dumps(_NOTE)]
        lines = [json.dumps(_initialize()), json.dumps(_request(5, "ping")), *unanswered]
        os.write(write, ("\n".join(lines) + "\n" + '{"partial').encode())
        reader.arm(lambda message, version: {} if message["method"] == "ping" else None)
        assert reader.sdk_wanted(WAIT_S)  # a request was left to it: import it now
        reader.handover()
        os.dup2(saved_out, 1)
        os.close(out_w)
        out_w = -1
        written = os.read(out_r, 65536).decode().splitlines()
        assert [json.loads(x)["id"] for x in written] == [1, 5]
        assert reader.answered == ["ping"]
        expected = "\n".join([lines[0], *unanswered]) + "\n" + '{"partial'
        assert reader.read.decode() == expected
    finally:
        os.dup2(saved, 0)
        os.dup2(saved_out, 1)
        for fd in (saved, saved_out, read, write, out_r, out_w):
            if fd >= 0:
                os.close(fd)


def test_the_sdk_client_over_a_stored_start(
    tmp_path: Path, first_started: Callable[..., Path]
) -> None:
    """The real SDK client: initialize, tools/list and the first search answered before
    the SDK was up, then a forwarded call and later searches served by the SDK's path."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    config, db = first_started(tmp_path), tmp_path / "c.db"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "TOOLSCOUT_TIMELINE": "1",
        # the SDK's import waits for the first search however loaded the machine (the
        # wait ends when it is answered): the client's first search is answered early
        "TOOLSCOUT_SDK_WAIT_S": "600",
    }
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolscout", "mcp", "serve", "-c", str(config), "--db", str(db)],
        env=env,
    )
    texts: list[str] = []

    async def session() -> None:
        with (tmp_path / "stderr.txt").open("w") as errlog:
            transport = stdio_client(params, errlog=errlog)
            async with Client(transport, mode="legacy", read_timeout_seconds=WAIT_S) as client:
                listed = await client.list_tools()
                assert [t.name for t in listed.tools] == ["search_tools", "call_tool"]
                for name, args in (
                    ("search_tools", {"query": "what time is it"}),
                    ("call_tool", {"name": "get_current_time", "arguments": {"timezone": "UTC"}}),
                    ("search_tools", {"query": "convert a time between zones", "k": 1}),
                    ("search_tools", {"query": "what time is it in Tokyo"}),
                ):
                    result = await client.call_tool(name, args)
                    assert not result.is_error, result
                    texts.append(" ".join(getattr(b, "text", "") for b in result.content))

    anyio.run(session)
    err = (tmp_path / "stderr.txt").read_text()
    assert "first tools/list answered early" in err and "first search_tools answered early" in err
    assert err.count("first search_tools answered") == 2  # early, then by the SDK's path
    first, called, later, again = texts
    assert json.loads(first)["tools"][0]["name"] == "get_current_time"
    assert "UTC" in called and json.loads(later)["tools"][0]["name"] == "convert_time"
    discoveries, calls = _log(db)
    assert len(discoveries) == 3 and discoveries[0] == json.loads(first)["discovery_id"]
    assert calls == [("time/get_current_time", discoveries[0])]
    assert json.loads(again)["discovery_id"] == discoveries[2]


def test_the_sdk_waits_while_everything_is_answered_early(tmp_path: Path) -> None:
    """Until a request is left to the SDK (or the first search is answered, or stdin
    ends), the reader does not ask for the SDK: its import would compete with the first
    search for the interpreter."""
    read, write = os.pipe()
    saved, saved_out = os.dup(0), os.dup(1)
    out_r, out_w = os.pipe()
    os.dup2(read, 0)
    os.dup2(out_w, 1)
    try:
        reader = Early("meta")
        reader.start()
        reader.arm(lambda message, version: {} if message["method"] == "ping" else None)
        os.write(write, (json.dumps(_initialize()) + "\n").encode())
        os.write(write, (json.dumps(_request(2, "ping")) + "\n").encode())
        assert not reader.sdk_wanted(0.5)  # answered here: nothing asks for the SDK
        os.close(write)  # stdin ends: the SDK is wanted (to see it)
        write = -1
        assert reader.sdk_wanted(WAIT_S)
        reader.handover()
        assert reader.answered == ["ping"]
    finally:
        os.dup2(saved, 0)
        os.dup2(saved_out, 1)
        for fd in (saved, saved_out, read, write, out_r, out_w):
            if fd >= 0:
                os.close(fd)


def test_a_session_is_told_of_list_changes_from_its_initialized_notification(
    tmp_path: Path,
) -> None:
    """Its list may have been answered before the SDK was up: the session is remembered
    for ``tools/list_changed`` from ``notifications/initialized``, not its first list."""
    gateway = _stored_gateway(tmp_path, "meta", 12)
    try:
        assert not gateway._sessions
        anyio.run(_sdk_answers, gateway, [_initialize(), _NOTE, _request(2, "ping")])
        assert len(gateway._sessions) == 1
    finally:
        gateway.close()


def test_a_request_the_sdk_would_refuse_is_left_to_it(tmp_path: Path) -> None:
    """Not JSON-RPC 2.0, or an id the SDK refuses: the SDK answers with its error, and
    every request after it goes to the SDK too."""
    read, write = os.pipe()
    saved, saved_out = os.dup(0), os.dup(1)
    out_r, out_w = os.pipe()
    os.dup2(read, 0)
    os.dup2(out_w, 1)
    try:
        bad = [{"id": 7, "method": "ping"}, {"jsonrpc": "2.0", "id": True, "method": "ping"}]
        for first in bad:
            lines = [_initialize(), first, _request(8, "ping")]
            reader = Early("meta")
            reader.start()
            reader.arm(lambda message, version: {})
            os.write(write, b"".join(json.dumps(m).encode() + b"\n" for m in lines))
            assert reader.sdk_wanted(WAIT_S)
            reader.handover()
            assert reader.answered == []
            assert reader.read.decode().splitlines()[1:] == [json.dumps(m) for m in lines[1:]]
    finally:
        os.dup2(saved, 0)
        os.dup2(saved_out, 1)
        for fd in (saved, saved_out, read, write, out_r, out_w):
            os.close(fd)
