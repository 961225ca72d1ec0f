"""Tasks (2025-11-25) through the gateway, with two upstreams that hand out the same task
ids: the caller sees them named per server, every ``tasks/*`` request maps back to the
right upstream and id, and each upstream's ``notifications/tasks/status`` reaches the
caller session that created the task, and no other session.

The upstreams are the published TypeScript SDK's ``McpServer`` with its in-memory task
store, numbering tasks ``task-1``, ``task-2``... in each process (the script below); the
caller is the official Python SDK client, on the handshake-era protocol (tasks left the
core protocol in 2026-07-28). (server-everything's own task tool, and two callers over
HTTP, are in ``test_mcp_everything.py``.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from _mcp_kit import TASKER, StatusWatch, local_gateway, node_env, node_script
from toolscout.mcp.server import MCPGateway
from toolscout.mcp.wire import raw_request


@pytest.fixture
def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    cmd = node_script(tmp_path / "tasker.cjs", TASKER)
    servers = {
        name: {"command": cmd[0], "args": [*cmd[1:], name], "env": node_env(),
               "toolscout": {"scopes": []}}
        for name in ("a", "b")
    }  # fmt: skip
    yield from local_gateway(servers, tmp_path)


def _text(result: dict[str, Any]) -> str:
    return " ".join(b.get("text", "") for b in result.get("content", []))


async def _until(check: Any, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)


def test_same_task_ids_from_two_servers_never_collide(gateway: MCPGateway) -> None:
    from mcp import Client

    mine, other = StatusWatch(), StatusWatch()

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with (
            gateway.running(wait_s=60),
            Client(gateway.server, mode="legacy", extensions=[mine]) as client,  # type: ignore[list-item]
            Client(gateway.server, mode="legacy", extensions=[other]),  # type: ignore[list-item]
        ):
            names = {t.name for t in (await client.list_tools()).tools}
            out["names"] = names
            created = {}
            for server, job in (("a", "alpha"), ("b", "beta")):
                call = {"name": f"{server}_work", "arguments": {"job": job, "ms": 300},
                        "task": {"ttl": 60000}}  # fmt: skip
                created[server] = (await raw_request(client, "tools/call", call))["task"]
            out["created"] = created
            ids = {server: task["taskId"] for server, task in created.items()}
            out["got"] = {
                s: await raw_request(client, "tasks/get", {"taskId": i}) for s, i in ids.items()
            }
            out["result"] = {
                s: await raw_request(client, "tasks/result", {"taskId": i}) for s, i in ids.items()
            }
            out["list"] = await raw_request(client, "tasks/list", {})
            long_call = {"name": "a_work", "arguments": {"job": "gamma", "ms": 30000},
                         "task": {"ttl": 60000}}  # fmt: skip
            doomed = (await raw_request(client, "tools/call", long_call))["task"]["taskId"]
            out["doomed"] = doomed
            out["cancelled"] = await raw_request(client, "tasks/cancel", {"taskId": doomed})
            out["b_after"] = await raw_request(client, "tasks/get", {"taskId": ids["b"]})
            try:
                await raw_request(client, "tasks/get", {"taskId": "task-1"})  # the bare id
                out["bare"] = "answered"
            except Exception as exc:
                out["bare"] = str(exc)
            await _until(lambda: sum(s["status"] == "completed" for s in mine.seen) >= 2)
            await asyncio.sleep(0.3)  # anything sent to the bystander would be there by now
        return out

    out = asyncio.run(scenario())
    assert {"a_work", "b_work"} <= out["names"]
    assert {s: t["taskId"] for s, t in out["created"].items()} == {"a": "a/task-1", "b": "b/task-1"}
    assert {s: g["taskId"] for s, g in out["got"].items()} == {"a": "a/task-1", "b": "b/task-1"}
    assert _text(out["result"]["a"]) == "a did alpha as task-1", out["result"]["a"]
    assert _text(out["result"]["b"]) == "b did beta as task-1", out["result"]["b"]
    related = out["result"]["a"].get("_meta", {}).get("io.modelcontextprotocol/related-task")
    assert related is None or related["taskId"] == "a/task-1", related
    listed = {t["taskId"]: t["status"] for t in out["list"]["tasks"]}
    assert listed == {"a/task-1": "completed", "b/task-1": "completed"}, out["list"]
    assert out["doomed"] == "a/task-2"
    assert out["cancelled"]["taskId"] == "a/task-2" and out["cancelled"]["status"] == "cancelled"
    assert out["b_after"]["status"] == "completed"
    assert out["bare"] == "unknown task task-1"
    # each upstream's status notices, renamed, reached the session that created the tasks
    seen = {(s["taskId"], s["status"], s.get("statusMessage")) for s in mine.seen}
    assert ("a/task-1", "working", "a: alpha halfway") in seen, mine.seen
    assert ("b/task-1", "working", "b: beta halfway") in seen, mine.seen
    assert {"a/task-1", "b/task-1"} <= {
        s["taskId"] for s in mine.seen if s["status"] == "completed"
    }
    assert {s["taskId"] for s in mine.seen} <= {"a/task-1", "b/task-1", "a/task-2"}
    # ... and no other session
    assert other.seen == []
