"""PydanticAI's real Agent and OpenAI chat model with toolscout's toolset, against a
local endpoint replaying recorded Chat Completions responses."""

from __future__ import annotations

import asyncio
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
from toolscout.adapters.pydantic_ai import toolscout_toolset
from toolscout.adapters.session import SEARCH_TOOL

# the SDK is imported by the test that drives it (the module's tests run as one group, on one
# worker), not at collection by every worker: ~0.5 s of CPU a worker


@pytest.fixture(scope="module")
def ts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toolscout]:
    with open_demo(tmp_path_factory) as opened:
        yield opened


def _tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


def test_toolset_grows_by_search_and_runs_through_the_gateway(ts: Toolscout) -> None:
    import pydantic_ai
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    entitled = entitled_names(ts)
    with replay("pydantic_ai") as endpoint:
        provider = OpenAIProvider(base_url=f"{endpoint.url}/v1", api_key="replay")
        toolset = toolscout_toolset(ts, token(), k=K)
        agent = pydantic_ai.Agent(OpenAIChatModel("gpt-5.4", provider=provider), toolsets=[toolset])
        # a fresh loop: run_sync reuses the thread's loop, which other SDKs may have shut
        result = asyncio.run(agent.run("Where is order 94218?"))
    assert result.output.startswith("Order 94218")
    bodies = [r.body for r in endpoint.requests]
    assert len(bodies) == 4
    lists = [[function_name(t) for t in b["tools"]] for b in bodies]
    assert lists[0] == [SEARCH_TOOL, "docs_search_docs"]
    found = lists[1][2:]
    assert 1 <= len(found) <= K and set(found) <= entitled and "orders_find_order" in found
    raws = [raw_tools(r) for r in endpoint.requests]
    assert raws[1].startswith(raws[0][:-1]) and raws[1] == raws[2] == raws[3]
    ran = _tool_messages(bodies[2])[-1]
    assert json.loads(ran["content"])["tool"] == "orders.find_order"
    refused = _tool_messages(bodies[3])[-1]  # the gateway validated the arguments
    assert refused["content"].startswith("refused: schema_mismatch")
    assert toolset.session.report()["shown"] * 5 < toolset.session.report()["catalog"]
