"""LangGraph: toolscout's retrieve_tools and gateway-only tool node in bigtool's loop,
with the real ``langchain-openai`` chat model against a local replaying endpoint."""

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
from toolscout.adapters.langgraph import LangGraphTools

# the SDK is imported by the test that drives it (the module's tests run as one group, on one
# worker), not at collection by every worker: ~0.7 s of CPU a worker

ASK = "Where is order 94218? Refund it in full."


@pytest.fixture(scope="module")
def ts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toolscout]:
    with open_demo(tmp_path_factory) as opened:
        yield opened


def _tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


def test_bigtool_loop_retrieves_with_toolscout_and_runs_through_the_gateway(
    ts: Toolscout,
) -> None:
    import langchain_openai

    entitled = entitled_names(ts)
    with replay("langgraph") as endpoint:
        llm = langchain_openai.ChatOpenAI(
            model="gpt-5.4", base_url=f"{endpoint.url}/v1", api_key="replay", max_retries=0
        )
        tools = LangGraphTools(ts, token(), k=K)
        assert {t.name for t in tools.registry.values()} == entitled  # entitled tools only
        state = tools.create_agent(llm).compile().invoke(tools.initial_state(ASK))
    assert state["messages"][-1].content.startswith("Order 94218")
    bodies = [r.body for r in endpoint.requests]
    assert len(bodies) == 4
    lists = [[function_name(t) for t in b["tools"]] for b in bodies]
    assert lists[0] == ["retrieve_tools", "docs_search_docs"]  # pinned tools bound from the start
    found = lists[1][2:]
    assert 1 <= len(found) <= K and set(found) <= entitled and "orders_find_order" in found
    raws = [raw_tools(r) for r in endpoint.requests]
    assert raws[1].startswith(raws[0][:-1]) and raws[1] == raws[2] == raws[3]
    ran = _tool_messages(bodies[2])[-1]
    assert json.loads(ran["content"])["tool"] == "orders.find_order"
    refused = _tool_messages(bodies[3])[-1]
    assert refused["tool_call_id"] == "call_replay_03" and refused["content"].startswith("refused:")


def test_the_tool_node_never_runs_a_tool_that_was_not_retrieved(ts: Toolscout) -> None:
    from langchain_core.messages import AIMessage

    tools = LangGraphTools(ts, token())
    node = tools.tool_node()
    call = {"name": "customers_search_customers", "args": {"query": "jane"}, "id": "c1"}
    before = {"messages": [AIMessage("", tool_calls=[call])], "selected_tool_ids": []}
    (message,) = node.invoke(before)["messages"]
    assert message.content.startswith("refused: not_retrieved") and message.status == "error"
    # the registered tool itself refuses too, whichever node calls it
    direct = tools.registry["customers.search_customers"].invoke({"query": "jane"})
    assert direct.startswith("refused: not_retrieved")
    after = {**before, "selected_tool_ids": ["customers.search_customers"]}
    (ran,) = node.invoke(after)["messages"]
    assert json.loads(ran.content)["tool"] == "customers.search_customers"


def test_retrieve_tools_fits_bigtools_create_agent(ts: Toolscout) -> None:
    from langgraph_bigtool import create_agent

    tools = LangGraphTools(ts, token())
    builder = create_agent(object(), tools.registry, retrieve_tools_function=tools.retrieve_tools)
    assert {"agent", "select_tools", "tools"} <= set(builder.nodes)
    ids = tools.retrieve_tools("look up an order by its id")
    assert ids and set(ids) <= set(tools.registry) and len(ids) <= tools.session.k
