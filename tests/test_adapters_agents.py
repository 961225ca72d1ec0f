"""The OpenAI Agents SDK's real Runner and Responses model, with toolscout's tools,
against a local endpoint replaying recorded responses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from _adapters_kit import K, entitled_names, open_demo, raw_tools, replay, token
from toolscout import Toolscout
from toolscout.adapters.agents import AgentTools
from toolscout.adapters.session import SEARCH_TOOL

# the SDK is imported by the test that drives it (the module's tests run as one group, on one
# worker), not at collection by every worker: ~1.8 s of CPU a worker

ASK = "Where is order 94218? Refund it in full."


@pytest.fixture(scope="module")
def ts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toolscout]:
    with open_demo(tmp_path_factory) as opened:
        yield opened


def _outputs(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in body["input"] if i.get("type") == "function_call_output"]


def test_agent_tools_grow_by_search_and_run_through_the_gateway(ts: Toolscout) -> None:
    import agents
    import openai

    entitled = entitled_names(ts)
    with replay("openai_agents") as endpoint:
        client = openai.AsyncOpenAI(base_url=f"{endpoint.url}/v1", api_key="r", max_retries=0)
        model = agents.OpenAIResponsesModel(model="gpt-5.4", openai_client=client)
        tools = AgentTools(ts, token(), k=K)
        agent = agents.Agent(name="support", model=model, tools=tools.tools)
        result = agents.Runner.run_sync(agent, ASK, run_config=tools.run_config())
    assert result.final_output.startswith("Order 94218")
    bodies = [r.body for r in endpoint.requests]
    assert len(bodies) == 4
    lists = [[t["name"] for t in b["tools"]] for b in bodies]
    assert lists[0] == [SEARCH_TOOL, "docs_search_docs"]  # the search tool and the pinned one
    found = lists[1][2:]
    assert 1 <= len(found) <= K and set(found) <= entitled and "orders_find_order" in found
    assert lists[1] == lists[2] == lists[3]
    raws = [raw_tools(r) for r in endpoint.requests]
    assert raws[1].startswith(raws[0][:-1]) and raws[1] == raws[2] == raws[3]
    ran = _outputs(bodies[2])[-1]
    assert json.loads(ran["output"])["tool"] == "orders.find_order"
    refused = _outputs(bodies[3])[-1]
    assert refused["call_id"] == "call_replay_03" and refused["output"].startswith("refused:")
    report = tools.session.report()
    assert report["shown"] * 5 < report["catalog"]


def test_an_entitled_tool_not_loaded_is_asked_for_by_name(ts: Toolscout) -> None:
    tools = AgentTools(ts, token())
    assert tools.session.refusal("customers_search_customers") is None
    refused = tools.session.refusal("billing_issue_full_refund")
    assert refused is not None and refused.status == "refused"
