"""``@modelcontextprotocol/server-everything`` behind the gateway, driven by the official
Python SDK client over streamable HTTP (issue 25, "How it will be checked", second point).

One ``toolscout mcp serve --transport http`` process fronts server-everything, the
reference filesystem server and a small paging server (both over stdio); each test
connects as a caller with its own bearer token. Checked: progress of an 8-second
operation (under a 4 s per-tool time-out that progress keeps moving) reaches the caller
and the call completes; a sampling and an elicitation request reach the caller's client
and its answers reach the server; the caller's roots reach the filesystem server;
resource templates resolve; every page of resources, templates and prompts comes
through; two callers never see each other's upstream session state; the tasks of the
2025-11-25 protocol (a task-augmented call, ``tasks/get``, ``tasks/result`` with the
input the task asks for, ``tasks/list``, ``tasks/cancel``) pass through, per caller.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import textwrap
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from _mcp_kit import (
    TASKER,
    StatusWatch,
    node_env,
    node_script,
    npm_server,
    stop,
    wait_port,
)
from fork_kit import toolscout as fork_toolscout
from fork_kit import upstream as fork_upstream
from port_kit import free_port
from toolscout.gateway.auth import issue_token
from toolscout.mcp.wire import raw_request

KEY = "mcp-everything-test-secret-0123456789abcdef"
#: the model name the test client's sampling answer carries (server-everything echoes it)
MODEL = "toolscout-test-model-7f3a"
#: a paging upstream: 7 resources, 5 templates and 5 prompts, 2 a page
PAGER = textwrap.dedent("""
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    from mcp import types
    import anyio

    def page(items, params):
        start = int(params.cursor) if params is not None and params.cursor else 0
        nxt = str(start + 2) if start + 2 < len(items) else None
        return items[start:start + 2], nxt

    RES = [types.Resource(uri=f"page://r/{i}", name=f"r{i}") for i in range(7)]
    TPL = [types.ResourceTemplate(uri_template=f"page://t{i}/{{x}}", name=f"t{i}")
           for i in range(5)]
    PRM = [types.Prompt(name=f"p{i}") for i in range(5)]

    async def list_resources(ctx, params):
        items, nxt = page(RES, params)
        return types.ListResourcesResult(resources=items, next_cursor=nxt)

    async def list_templates(ctx, params):
        items, nxt = page(TPL, params)
        return types.ListResourceTemplatesResult(resource_templates=items, next_cursor=nxt)

    async def list_prompts(ctx, params):
        items, nxt = page(PRM, params)
        return types.ListPromptsResult(prompts=items, next_cursor=nxt)

    async def read(ctx, params):
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=str(params.uri), text=f"read {params.uri}")])

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[])

    server = Server("pager", on_list_resources=list_resources,
                    on_list_resource_templates=list_templates, on_list_prompts=list_prompts,
                    on_read_resource=read, on_list_tools=list_tools)

    async def main():
        async with stdio_server() as (r, w):
            await server.run(r, w, server.create_initialization_options())

    anyio.run(main)
""")


def _text(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("everything")
    (tmp / "pager.py").write_text(PAGER)
    base, mine = tmp / "base", tmp / "mine"
    base.mkdir()
    mine.mkdir()
    (mine / "only-in-my-root.txt").write_text("x")
    everything, files = npm_server("server-everything"), npm_server("server-filesystem")
    tasker = node_script(tmp / "tasker.cjs", TASKER)
    config = tmp / "servers.json"
    config.write_text(json.dumps({
        "mcpServers": {
            "ev": {"command": everything[0], "args": [*everything[1:], "stdio"],
                   "toolscout": {"scopes": [],
                                 "tools": {"trigger-long-running-operation": {"timeout_s": 4}}}},
            "fs": {"command": files[0], "args": [*files[1:], str(base)],
                   "toolscout": {"scopes": []}},
            # forked (fork_kit): a Python upstream's pages, not its start
            "pg": fork_upstream(tmp / "pager.py", toolscout={"scopes": []}),
            "tk": {"command": tasker[0], "args": [*tasker[1:], "tk"], "env": node_env(),
                   "toolscout": {"scopes": []}},
        },
        "toolscout": {"jwt_key": KEY, "mode": "direct", "connect_timeout_s": 90,
                      "db": str(tmp / "g.db")},
    }))  # fmt: skip
    port = free_port()
    log = (tmp / "gateway.log").open("w")
    proc = subprocess.Popen(
        fork_toolscout("mcp", "serve", "--config", str(config), "--transport", "http",
                       "--port", str(port)),  # forked (fork_kit): what it passes, not its start
        stderr=log, stdout=log, env={**os.environ, "XDG_DATA_HOME": str(tmp / "xdg")},
    )  # fmt: skip
    try:
        wait_port(port, 120)
        yield {"url": f"http://127.0.0.1:{port}/mcp", "mine": mine, "base": base}
    finally:
        stop(proc)  # type: ignore[arg-type]
        log.close()


def _token(subject: str) -> str:
    return issue_token(subject=subject, key=KEY, scopes=[])


@asynccontextmanager
async def _client(gw: dict[str, Any], subject: str, **kw: Any) -> AsyncIterator[Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {_token(subject)}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http,
        Client(streamable_http_client(gw["url"], http_client=http), **kw) as client,
    ):
        yield client


@pytest.mark.slow
def test_progress_of_an_operation_twice_its_time_out_reaches_the_caller(
    gateway: dict[str, Any],
) -> None:
    """The one slow test here (8 s): 7 progress reports, 8/7 s apart, under a 4 s per-tool
    time-out that each report moves (the call outlives its time-out twice over, so a
    deadline that progress did not move would fail it; ~2.9 s of slack between reports,
    where the 14 s operation and 7 s time-out this test used before had 5 s); the call
    completes."""
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async def scenario() -> Any:
        async with _client(gateway, "alice") as client:
            return await client.call_tool(
                "trigger-long-running-operation",
                {"duration": 8, "steps": 7},
                progress_callback=on_progress,
            )

    result = asyncio.run(scenario())
    assert not result.is_error, _text(result)
    assert "completed" in _text(result).lower(), _text(result)
    assert [p for p, _ in seen] == [1, 2, 3, 4, 5, 6, 7] and seen[-1][1] == 7, seen


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_sampling_and_elicitation_reach_the_client(gateway: dict[str, Any], mode: str) -> None:
    """On a 2026-07-28 connection (auto) and a handshake-era one (legacy)."""
    from mcp.types import CreateMessageResult, ElicitResult, TextContent

    asked: list[str] = []

    async def sampling(context: Any, params: Any) -> Any:
        asked.append("sampling")
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="sampled"), model=MODEL
        )

    async def elicitation(context: Any, params: Any) -> Any:
        asked.append("elicitation")
        return ElicitResult(action="accept", content={"name": "Ada Lovelace"})

    async def scenario() -> tuple[Any, Any]:
        async with _client(
            gateway, f"sampler-{mode}", mode=mode,
            sampling_callback=sampling, elicitation_callback=elicitation,
        ) as client:  # fmt: skip
            sampled = await client.call_tool(
                "trigger-sampling-request", {"prompt": "say hi", "maxTokens": 20}
            )
            elicited = await client.call_tool("trigger-elicitation-request", {})
            return sampled, elicited

    sampled, elicited = asyncio.run(scenario())
    assert not sampled.is_error and MODEL in _text(sampled), _text(sampled)
    assert not elicited.is_error and "Ada Lovelace" in _text(elicited), _text(elicited)
    assert asked == ["sampling", "elicitation"]


def test_a_tool_needing_a_capability_the_client_lacks_is_not_offered_to_it(
    gateway: dict[str, Any],
) -> None:
    """The caller's own session declares upstream what its client declares: server-everything
    registers its sampling tool only for clients that can sample."""

    async def scenario() -> Any:
        async with _client(gateway, "no-sampling", mode="legacy") as client:
            return await client.call_tool(
                "trigger-sampling-request", {"prompt": "say hi", "maxTokens": 20}
            )

    result = asyncio.run(scenario())
    assert result.is_error and "not found" in _text(result).lower(), _text(result)


def test_roots_reach_a_filesystem_server(gateway: dict[str, Any]) -> None:
    """The caller's roots replace the server's own directories when its session opens, and
    again when the client says its roots changed."""
    from mcp.types import ListRootsResult, Root

    current = [gateway["mine"]]

    async def roots(context: Any) -> Any:
        return ListRootsResult(roots=[Root(uri=p.as_uri(), name=p.name) for p in current])

    async def scenario() -> tuple[str, str, str]:
        async with _client(gateway, "rooted", mode="legacy", list_roots_callback=roots) as client:
            allowed = ""
            for _ in range(100):  # the server asks for the roots once its session is open
                allowed = _text(await client.call_tool("list_allowed_directories", {}))
                if str(gateway["mine"]) in allowed:
                    break
                await asyncio.sleep(0.1)
            listed = _text(await client.call_tool("list_directory", {"path": str(gateway["mine"])}))
            current[:] = [gateway["base"]]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # roots: deprecated in 2026-07-28, not gone
                await client.session.send_roots_list_changed()
            changed = ""
            for _ in range(100):  # the server asks for the roots again, then uses them
                changed = _text(await client.call_tool("list_allowed_directories", {}))
                if str(gateway["base"]) in changed:
                    break
                await asyncio.sleep(0.1)
            return allowed, listed, changed

    allowed, listed, changed = asyncio.run(scenario())
    assert str(gateway["mine"]) in allowed and str(gateway["base"]) not in allowed, allowed
    assert "only-in-my-root.txt" in listed, listed
    assert str(gateway["base"]) in changed and str(gateway["mine"]) not in changed, changed


def test_templates_resolve_and_every_page_comes_through(gateway: dict[str, Any]) -> None:
    async def scenario() -> tuple[Any, Any, Any, Any, Any]:
        async with _client(gateway, "reader") as client:
            # the upstream's own instructions follow the gateway's
            assert "[ev] " in (client.instructions or ""), client.instructions
            templates = await client.list_resource_templates()
            text = await client.read_resource("demo://resource/dynamic/text/7")
            resources = await client.list_resources()
            prompts = await client.list_prompts()
            paged = await client.read_resource("page://r/6")
            return templates, text, resources, prompts, paged

    templates, text, resources, prompts, paged = asyncio.run(scenario())
    uris = {t.uri_template for t in templates.resource_templates}
    assert "demo://resource/dynamic/text/{resourceId}" in uris
    assert {f"page://t{i}/{{x}}" for i in range(5)} <= uris  # 3 pages of the pager
    assert "Resource 7" in text.contents[0].text
    listed = {str(r.uri) for r in resources.resources}
    assert {f"page://r/{i}" for i in range(7)} <= listed  # 4 pages
    assert any(u.startswith("demo://resource/static/document/") for u in listed)
    names = {p.name for p in prompts.prompts}
    assert {f"pg/p{i}" for i in range(5)} <= names and "ev/simple-prompt" in names
    assert paged.contents[0].text == "read page://r/6"


def test_two_callers_never_see_each_others_upstream_session(gateway: dict[str, Any]) -> None:
    """server-everything keeps resources per session: one caller's is not another's."""
    data = "data:text/plain;base64," + base64.b64encode(b"alice only").decode()

    async def alice() -> tuple[Any, set[str]]:
        async with _client(gateway, "alice") as client:
            made = await client.call_tool(
                "gzip-file-as-resource", {"name": "alice-secret.gz", "data": data}
            )
            return made, {str(r.uri) for r in (await client.list_resources()).resources}

    async def bob() -> tuple[set[str], Any]:
        async with _client(gateway, "bob") as client:
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            try:
                read = await client.read_resource("demo://resource/session/alice-secret.gz")
            except Exception as exc:  # the SDK raises the protocol error
                read = exc
            return uris, read

    made, alice_sees = asyncio.run(alice())
    assert not made.is_error, _text(made)
    assert "demo://resource/session/alice-secret.gz" in alice_sees
    bob_sees, bob_read = asyncio.run(bob())
    assert "demo://resource/session/alice-secret.gz" not in bob_sees
    assert isinstance(bob_read, Exception), bob_read


def test_tasks_pass_through_per_caller(gateway: dict[str, Any]) -> None:
    """A task-augmented call, its status, its result (with the input it asks for on the
    way), the caller's task list; another caller cannot see or cancel it. (The Python SDK
    2.3 has the task types but no task methods: requests go through its session raw.)"""
    from mcp.types import ElicitResult

    asked: list[str] = []
    watch, bystander_watch = StatusWatch(), StatusWatch()

    async def elicitation(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"interpretation": "apiculture"})

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with (
            _client(
                gateway, "tasker", mode="legacy", elicitation_callback=elicitation,
                extensions=[watch],
            ) as client,
            # the same caller on another connection, and another caller: neither is told
            _client(gateway, "tasker", mode="legacy", extensions=[bystander_watch]),
            _client(gateway, "other", mode="legacy", extensions=[bystander_watch]),
        ):  # fmt: skip
            caps = client.server_capabilities.tasks
            out["caps"] = caps is not None and caps.requests is not None
            listed = {t.name: t for t in (await client.list_tools()).tools}
            execution = listed["simulate-research-query"].execution
            out["support"] = execution.task_support if execution is not None else None
            ask, ttl = {"topic": "bees", "ambiguous": True}, {"ttl": 60000}
            call = {"name": "simulate-research-query", "arguments": ask, "task": ttl}
            created = await raw_request(client, "tools/call", call)
            task_id = created["task"]["taskId"]
            out["status"] = (await raw_request(client, "tasks/get", {"taskId": task_id}))["status"]
            out["result"] = await raw_request(client, "tasks/result", {"taskId": task_id})
            out["list"] = await raw_request(client, "tasks/list", {})
            out["task_id"] = task_id
            doomed = await raw_request(client, "tools/call", {
                "name": "simulate-research-query", "arguments": {"topic": "wasps"},
                "task": {"ttl": 60000}})  # fmt: skip
            out["doomed"] = doomed["task"]["taskId"]
            for _ in range(100):  # the status notices of the finished task are sent at once
                if any(s["status"] == "completed" for s in watch.seen):
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # anything sent to a bystander would be there by now
        async with _client(gateway, "other", mode="legacy") as other:
            errors = []
            for method in ("tasks/get", "tasks/cancel"):
                try:
                    await raw_request(other, method, {"taskId": out["doomed"]})
                except Exception as exc:
                    errors.append(str(exc))
            out["other"] = errors
            out["other_list"] = await raw_request(other, "tasks/list", {})
        async with _client(gateway, "tasker", mode="legacy") as client:
            cancelled = await raw_request(client, "tasks/cancel", {"taskId": out["doomed"]})
            out["cancelled"] = cancelled["status"]
        return out

    out = asyncio.run(scenario())
    assert out["task_id"].startswith("ev/")  # named per server
    assert out["caps"] and out["support"] == "required"
    assert out["status"] in ("working", "input_required", "completed")
    report = json.dumps(out["result"])
    assert "Research Report" in report and "apiculture" in report, report[:500]
    assert len(asked) == 1 and "bees" in asked[0]
    assert out["task_id"] in {t["taskId"] for t in out["list"]["tasks"]}
    assert out["other"] == [f"unknown task {out['doomed']}"] * 2
    assert out["other_list"] == {"tasks": []}
    assert out["cancelled"] == "cancelled"
    # the upstream's status notices reached the connection that created the task, renamed
    statuses = [s["status"] for s in watch.seen if s["taskId"] == out["task_id"]]
    assert "input_required" in statuses and statuses[-1] == "completed", watch.seen
    assert {s["taskId"] for s in watch.seen} <= {out["task_id"], out["doomed"]}
    assert bystander_watch.seen == []


def test_two_callers_same_upstream_task_ids_stay_their_own(gateway: dict[str, Any]) -> None:
    """Each caller's own session of the numbering task server hands out ``task-1``: each
    caller gets its own task under the gateway's name, and its own result."""

    async def one(subject: str) -> dict[str, Any]:
        async with _client(gateway, subject, mode="legacy") as client:
            call = {
                "name": "work",
                "arguments": {"job": subject, "ms": 200},
                "task": {"ttl": 60000},
            }
            task_id = (await raw_request(client, "tools/call", call))["task"]["taskId"]
            return {"id": task_id, "result": await raw_request(
                client, "tasks/result", {"taskId": task_id})}  # fmt: skip

    async def both() -> list[dict[str, Any]]:
        return list(await asyncio.gather(one("ann"), one("ben")))

    ann, ben = asyncio.run(both())
    assert ann["id"] == ben["id"] == "tk/task-1"
    assert "tk did ann as task-1" in json.dumps(ann["result"]), ann
    assert "tk did ben as task-1" in json.dumps(ben["result"]), ben
