"""Shared helpers of the MCP gateway tests: where the published servers are, ports, processes.

The npm servers and the Inspector CLI are installed by ``make test`` into
``.ci/node`` (``TOOLSCOUT_NODE_MODULES`` overrides the ``node_modules`` path); the
PyPI servers come with the dev extra. Nothing here skips: a missing server fails.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fork_kit
from port_kit import free_port

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
APP = Path(__file__).resolve().parent / "mcp_upstream_app.py"


def capable_link() -> Any:
    """A caller's link that declared sampling (``toolscout.mcp.relay.Link``): its calls run
    in a round of their own, a task the gateway can ask the caller through."""
    from types import SimpleNamespace

    from mcp.types import ClientCapabilities, SamplingCapability

    from toolscout.mcp.relay import Link

    caps = ClientCapabilities(sampling=SamplingCapability())
    return Link(SimpleNamespace(session=SimpleNamespace(client_capabilities=caps)))


def initialize_request(version: str = "2025-06-18", id_: int = 1) -> dict[str, Any]:
    """A raw client's ``initialize`` request (tests that drive the gateway line by line)."""
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "1"},
        },
    }


def node_modules() -> Path:
    path = Path(os.environ.get("TOOLSCOUT_NODE_MODULES", ROOT / ".ci" / "node" / "node_modules"))
    assert (path / "@modelcontextprotocol").is_dir(), (
        f"the npm MCP servers are not installed under {path}; run make test (it installs them)"
    )
    return path


def npm_server(package: str) -> list[str]:
    """``node <entry>`` of an installed ``@modelcontextprotocol/<package>``."""
    entry = node_modules() / "@modelcontextprotocol" / package / "dist" / "index.js"
    assert entry.is_file(), f"{entry} is missing; run make test (it installs it)"
    return ["node", str(entry)]


def inspector_cli() -> tuple[list[str], Path]:
    """The Inspector CLI command, and the directory it must run in (it reads ../package.json)."""
    build = node_modules() / "@modelcontextprotocol" / "inspector-cli" / "build"
    assert (build / "index.js").is_file(), f"{build} is missing; run make test (it installs it)"
    return ["node", str(build / "index.js")], build


def py_server(name: str) -> str:
    path = BIN / name
    assert path.is_file(), f"{path} is missing; install the dev extra"
    return str(path)


def forked_py_server(name: str, **fields: Any) -> dict[str, Any]:
    """An ``mcpServers`` entry that runs the dev extra's published server ``name`` (its
    console script, as the script runs it) forked from the worker's fork server
    (``fork_kit.upstream``: a process of its own on the gateway's pipes); other fields as
    given. For a test of what the gateway does with the server, not of the server's start."""
    return fork_kit.upstream(Path(py_server(name)), **fields)


def mute_listener() -> tuple[socket.socket, str]:
    """A socket on 127.0.0.1 that accepts connections (the kernel's backlog) and never
    answers, with its MCP URL: an HTTP upstream that hangs. Close it when done."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"


def wait_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def start_app(port: int, *args: str) -> subprocess.Popen[bytes]:
    """The SDK-written test upstream over streamable HTTP on 127.0.0.1:port, forked from the
    worker's fork server (``fork_kit.command``: a process of its own; :func:`stop`'s SIGTERM
    reaches it through the client, which exits with its status once it has ended, so its
    port is free again when ``stop`` returns). Its tests are about what a gateway does when
    it answers, fails, changes and goes away, not about its start."""
    proc = subprocess.Popen(
        fork_kit.command(APP, "--port", str(port), *args),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port)
    except TimeoutError:
        proc.kill()
        raise
    return proc


def http_gateway(config: Path, tmp_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """``toolscout mcp serve --transport http`` with ``config`` on a free port (forked:
    ``fork_kit.toolscout``), with its own user data dir under ``tmp_path``; not yet waited on."""
    port = free_port()
    proc = subprocess.Popen(
        fork_kit.toolscout("mcp", "serve", "--config", str(config), "--transport", "http",
                           "--port", str(port)),
        stderr=subprocess.DEVNULL, env={**os.environ, "XDG_DATA_HOME": str(tmp_path / "xdg")},
    )  # fmt: skip
    return proc, port


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def node_script(path: Path, source: str) -> list[str]:
    """``node <path>`` for a CommonJS script written here, resolving the installed npm
    packages (the published TypeScript SDK) through ``NODE_PATH``."""
    path.write_text(source)
    return ["node", str(path)]


def node_env() -> dict[str, str]:
    """The environment a :func:`node_script` upstream needs (its ``NODE_PATH``)."""
    return {"NODE_PATH": str(node_modules()), "PATH": os.environ.get("PATH", "")}


class StatusWatch:
    """A client extension that keeps the ``notifications/tasks/status`` a session receives
    (the Python SDK drops them unless a binding observes them)."""

    identifier = "dev.toolscout.test/task-status"

    def __init__(self) -> None:
        self.seen: list[dict[str, object]] = []

    def settings(self) -> dict[str, object]:
        return {}

    def claims(self) -> tuple[()]:
        return ()

    def notifications(self) -> list[object]:
        from mcp.client.extension import NotificationBinding
        from mcp.types import TaskStatusNotificationParams

        async def seen(params: TaskStatusNotificationParams) -> None:
            self.seen.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))

        return [
            NotificationBinding(
                method="notifications/tasks/status",
                params_type=TaskStatusNotificationParams,
                handler=seen,
            )
        ]


#: a task server whose task ids are task-1, task-2, ... in every process
TASKER = r"""
const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StdioServerTransport } = require("@modelcontextprotocol/sdk/server/stdio.js");
const { InMemoryTaskStore, InMemoryTaskMessageQueue } =
  require("@modelcontextprotocol/sdk/experimental/tasks");
const { z } = require("zod");

class Numbered extends InMemoryTaskStore {
  constructor() { super(); this.n = 0; }
  generateTaskId() { this.n += 1; return `task-${this.n}`; }
}
const name = process.argv[2];
const server = new McpServer({ name, version: "1.0.0" }, {
  capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
  taskStore: new Numbered(), taskMessageQueue: new InMemoryTaskMessageQueue(),
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
server.experimental.tasks.registerToolTask("work", {
  description: `Work on a job in the background, as a task of ${name}`,
  inputSchema: { job: z.string(), ms: z.number() },
  execution: { taskSupport: "required" },
  annotations: { readOnlyHint: true },
}, {
  createTask: async (args, extra) => {
    const task = await extra.taskStore.createTask({ ttl: 60000, pollInterval: 100 });
    (async () => {
      await sleep(args.ms);
      const note = `${name}: ${args.job} halfway`;
      await extra.taskStore.updateTaskStatus(task.taskId, "working", note);
      await sleep(args.ms);
      await extra.taskStore.storeTaskResult(task.taskId, "completed", {
        content: [{ type: "text", text: `${name} did ${args.job} as ${task.taskId}` }],
      });
    })().catch(() => {});
    return { task };
  },
  getTask: async (args, extra) => extra.taskStore.getTask(extra.taskId),
  getTaskResult: async (args, extra) => extra.taskStore.getTaskResult(extra.taskId),
});
server.connect(new StdioServerTransport());
"""


def local_gateway(servers: dict[str, Any], tmp_path: Path) -> Iterator[Any]:
    """An in-process gateway in direct mode over ``servers``, for the local user ``dev``
    with no scopes, its catalog in ``tmp_path`` (a fixture's body: yields, then closes)."""
    from toolscout.mcp.config import parse_config
    from toolscout.mcp.server import MCPGateway

    cfg = parse_config({
        "mcpServers": servers,
        "toolscout": {"mode": "direct", "connect_timeout_s": 60,
                      "principal": {"subject": "dev"}, "db": str(tmp_path / "g.db")},
    })  # fmt: skip
    gw = MCPGateway(cfg)
    yield gw
    gw.close()
