"""The Anthropic adapter driving the real ``anthropic`` client against a local endpoint
that replays recorded Messages responses; assertions read what the SDK actually sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from _adapters_kit import (
    K,
    all_names,
    entitled_names,
    open_demo,
    raw_tools,
    replay,
    token,
)
from toolscout import Toolscout
from toolscout.adapters.anthropic import AnthropicTools
from toolscout.adapters.session import SEARCH_TOOL, Mode
from toolscout.discovery.tokencount import count_json

# the SDK is imported by the test that drives it (the module's tests run as one group, on one
# worker), not at collection by every worker: ~1.7 s of CPU a worker

MODEL = "claude-sonnet-4-5"
ASK = "Where is order 94218? Refund it in full."


@pytest.fixture(scope="module")
def ts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toolscout]:
    with open_demo(tmp_path_factory) as opened:
        yield opened


def _results(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]
    return [b for b in last["content"] if b.get("type") == "tool_result"]


def test_deferred_sends_only_entitled_tools_and_answers_search_with_references(
    ts: Toolscout,
) -> None:
    import anthropic

    entitled = entitled_names(ts)
    with replay("anthropic_deferred") as endpoint:
        client = anthropic.Anthropic(base_url=endpoint.url, api_key="replay", max_retries=0)
        tools = AnthropicTools(ts, token(), k=K)
        assert tools.mode is Mode.DEFERRED  # 65 entitled tools: past the tier threshold
        messages: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
        reply = tools.run(client, model=MODEL, messages=messages)
    assert reply.stop_reason == "end_turn"
    bodies = [r.body for r in endpoint.requests]
    assert len(bodies) == 4 and all(r.path == "/v1/messages" for r in endpoint.requests)
    first = bodies[0]["tools"]
    names = [t["name"] for t in first]
    # every entitled tool once, deferred unless pinned; the search tool; nothing else
    assert set(names) == entitled | {SEARCH_TOOL} and len(names) == len(set(names))
    assert "billing_issue_full_refund" not in names and len(all_names(ts)) > len(entitled)
    by_name = {t["name"]: t for t in first}
    assert "defer_loading" not in by_name["docs_search_docs"]  # pinned
    assert "defer_loading" not in by_name[SEARCH_TOOL]
    deferred = {n for n, t in by_name.items() if t.get("defer_loading") is True}
    assert deferred == entitled - {"docs_search_docs"}
    # what the model is shown up front: pinned + search tool, far less than the catalog
    visible = [t for t in first if not t.get("defer_loading")]
    catalog = tools.session.report()["catalog"]
    assert count_json(visible) * 10 < catalog
    # the search answer: at most k tool_reference blocks, all entitled
    (search_result,) = _results(bodies[1])
    refs = search_result["content"]
    assert 1 <= len(refs) <= K and all(r["type"] == "tool_reference" for r in refs)
    assert {r["tool_name"] for r in refs} <= entitled
    assert "orders_find_order" in {r["tool_name"] for r in refs}
    # the found tool ran through the gateway; the unentitled one was refused, as a result
    (ran,) = _results(bodies[2])
    assert json.loads(ran["content"])["tool"] == "orders.find_order" and not ran.get("is_error")
    (refused,) = _results(bodies[3])
    assert refused["is_error"] is True and refused["content"].startswith("refused:")
    # the tool list is byte-identical on every turn
    prefixes = {raw_tools(r) for r in endpoint.requests}
    assert len(prefixes) == 1
    report = tools.session.report()
    assert report["shown"] * 5 < report["catalog"] and report["pinned"] > 0


def test_plain_mode_sends_shortlists_appended_turn_by_turn(ts: Toolscout) -> None:
    import anthropic

    entitled = entitled_names(ts)
    with replay("anthropic_plain") as endpoint:
        client = anthropic.Anthropic(base_url=endpoint.url, api_key="replay", max_retries=0)
        tools = AnthropicTools(ts, token(), k=K, mode="plain")
        messages: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
        tools.run(client, model=MODEL, messages=messages)
        messages.append({"role": "user", "content": "Is jane@example.com's account active?"})
        tools.run(client, model=MODEL, messages=messages)
    bodies = [r.body for r in endpoint.requests]
    assert len(bodies) == 5
    lists = [[t["name"] for t in b["tools"]] for b in bodies]
    for names in lists:
        assert set(names) <= entitled and SEARCH_TOOL not in names
        assert not any(t.get("defer_loading") for b in bodies for t in b["tools"])
    assert lists[0][0] == "docs_search_docs"  # pinned first
    assert len(lists[0]) <= 1 + K and "orders_find_order" in lists[0]
    # one search per user request, at most k new schemas each, appended after the old ones
    assert len(tools.session.searches) == 2
    assert len(lists[3]) - len(lists[2]) <= K
    raws = [raw_tools(r) for r in endpoint.requests]
    assert raws[0] == raws[1] == raws[2] and raws[3] == raws[4]
    assert raws[3].startswith(raws[2][:-1])  # same bytes, new tools after them
    assert "customers_search_customers" in lists[3]
    (refused,) = _results(bodies[2])
    assert refused["is_error"] is True and "refused" in refused["content"]
    report = tools.session.report()
    assert report["shown"] * 5 < report["catalog"]


def test_auto_falls_back_to_plain_below_the_tier_threshold(ts: Toolscout) -> None:
    tools = AnthropicTools(ts, token("hr_manager"))
    assert tools.mode is Mode.PLAIN  # 15 entitled tools: the groups tier sends them all
    sent = {t["name"] for t in tools.tools("who is on leave next week")}
    assert sent == entitled_names(ts, "hr_manager")


def test_a_bad_search_call_is_an_error_result_not_a_crash(ts: Toolscout) -> None:
    tools = AnthropicTools(ts, token(), mode="deferred")
    message = {"content": [{"type": "tool_use", "id": "t1", "name": SEARCH_TOOL, "input": {}}]}
    answer = tools.answer(message)
    assert answer is not None
    (block,) = answer["content"]
    assert block["is_error"] is True and "query" in block["content"]


def test_a_forged_token_is_refused_at_execution(ts: Toolscout) -> None:
    tools = AnthropicTools(ts, token(), mode="plain")
    tools.session.caller = token() + "x"
    message = {"content": [{"type": "tool_use", "id": "t1", "name": "orders_find_order",
                            "input": {"order_id": "94218"}}]}  # fmt: skip
    answer = tools.answer(message)
    assert answer is not None
    assert answer["content"][0]["is_error"] is True
    assert answer["content"][0]["content"].startswith("refused:")
