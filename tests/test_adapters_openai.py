"""The OpenAI adapters driving the real ``openai`` client (Responses and Chat
Completions) against a local endpoint replaying recorded responses; assertions read
what the SDK actually sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from _adapters_kit import (
    K,
    entitled_names,
    function_name,
    open_demo,
    raw_tools,
    replay,
    token,
)
from toolscout import Toolscout
from toolscout.adapters.openai import ChatTools, ResponsesTools
from toolscout.adapters.session import Mode
from toolscout.discovery.tokencount import count_json
from toolscout.errors import ConfigError

# the SDK is imported by the tests that drive it (the module's tests run as one group, on one
# worker), not at collection by every worker

MODEL = "gpt-5.4"
ASK = "Where is order 94218? Refund it in full."


@pytest.fixture(scope="module")
def ts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toolscout]:
    with open_demo(tmp_path_factory) as opened:
        yield opened


def _client(url: str) -> Any:
    import openai

    return openai.OpenAI(base_url=f"{url}/v1", api_key="replay", max_retries=0)


def _items(body: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [i for i in body["input"] if isinstance(i, dict) and i.get("type") == kind]


@pytest.mark.parametrize("namespaces", [False, True])
def test_responses_tool_search_is_answered_by_toolscout(ts: Toolscout, namespaces: bool) -> None:
    entitled = entitled_names(ts)
    with replay("openai_responses") as endpoint:
        tools = ResponsesTools(ts, token(), k=K, namespaces=namespaces)
        assert tools.mode is Mode.DEFERRED
        items: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
        response = tools.run(_client(endpoint.url), model=MODEL, input=items)
    assert response.output_text.startswith("Order 94218")
    assert all(r.path == "/v1/responses" for r in endpoint.requests)
    bodies = [r.body for r in endpoint.requests]
    assert len(bodies) == 4
    first = bodies[0]["tools"]
    (search,) = [t for t in first if t["type"] == "tool_search"]
    assert search["execution"] == "client" and "query" in search["parameters"]["properties"]
    functions = [t for t in first if t["type"] == "function"]
    spaces = [t for t in first if t["type"] == "namespace"]
    assert bool(spaces) is namespaces
    inner = [f for ns in spaces for f in ns["tools"]]
    names = [f["name"] for f in functions + inner]
    assert set(names) == entitled and len(names) == len(set(names))
    assert all(f.get("defer_loading") is True for f in inner)
    for f in functions:  # only the pinned one is sent loaded
        assert f.get("defer_loading") is (None if f["name"] == "docs_search_docs" else True)
    # the search's answer: a tool_search_output with at most k entitled functions
    (output,) = _items(bodies[1], "tool_search_output")
    assert output["call_id"] == "call_replay_search" and output["execution"] == "client"
    loaded = [f for t in output["tools"] for f in (t["tools"] if namespaces else [t])]
    assert 1 <= len(loaded) <= K and {f["name"] for f in loaded} <= entitled
    assert "orders_find_order" in {f["name"] for f in loaded}
    # executions through the gateway; the unentitled call refused, returned as its output
    outputs = _items(bodies[3], "function_call_output")
    assert json.loads(outputs[0]["output"])["tool"] == "orders.find_order"
    assert outputs[1]["call_id"] == "call_replay_03"
    assert outputs[1]["output"].startswith("refused:")
    assert len({raw_tools(r) for r in endpoint.requests}) == 1  # byte-identical tool lists
    # shown up front: the search tool, the pinned function, each namespace's name and text
    visible = [t for t in first if t["type"] != "namespace" and not t.get("defer_loading")]
    visible += [{"name": ns["name"], "description": ns["description"]} for ns in spaces]
    report = tools.session.report()
    assert count_json(visible) * 10 < report["catalog"] and report["shown"] * 5 < report["catalog"]


def test_responses_plain_mode_sends_the_shortlist(ts: Toolscout) -> None:
    entitled = entitled_names(ts)
    with replay("openai_responses") as endpoint:
        tools = ResponsesTools(ts, token(), k=K, mode="plain")
        items: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
        tools.run(_client(endpoint.url), model=MODEL, input=items)
    body = endpoint.requests[0].body
    assert len({raw_tools(r) for r in endpoint.requests}) == 1
    names = [t["name"] for t in body["tools"]]
    assert names[0] == "docs_search_docs" and len(names) <= 1 + K
    assert set(names) <= entitled and "orders_find_order" in names
    assert all(t["type"] == "function" and "defer_loading" not in t for t in body["tools"])


def test_chat_completions_plain(ts: Toolscout) -> None:
    entitled = entitled_names(ts)
    with replay("openai_chat") as endpoint:
        tools = ChatTools(ts, token(), k=K)
        assert tools.session.mode is Mode.PLAIN  # Chat Completions has no deferred loading
        messages: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
        completion = tools.run(_client(endpoint.url), model=MODEL, messages=messages)
    assert completion.choices[0].finish_reason == "stop"
    assert all(r.path == "/v1/chat/completions" for r in endpoint.requests)
    bodies = [r.body for r in endpoint.requests]
    names = [function_name(t) for t in bodies[0]["tools"]]
    assert names[0] == "docs_search_docs" and len(names) <= 1 + K
    assert set(names) <= entitled and "orders_find_order" in names
    assert len({raw_tools(r) for r in endpoint.requests}) == 1
    tool_messages = [m for m in bodies[2]["messages"] if m["role"] == "tool"]
    assert tool_messages[-1]["tool_call_id"] == "call_replay_02"
    assert tool_messages[-1]["content"].startswith("refused:")


def test_chat_completions_refuses_deferred_mode(ts: Toolscout) -> None:
    with pytest.raises(ConfigError, match="no deferred tool loading"):
        ChatTools(ts, token(), mode="deferred")
