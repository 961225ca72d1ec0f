"""OpenAI Agents SDK: the agent's tools come from toolscout, found as it needs them.

Run: PYTHONPATH=src python examples/openai_agents.py (replays recorded replies)."""

import openai
from _demo import demo, replay, token
from agents import Agent, OpenAIResponsesModel, Runner

from toolscout.adapters.agents import AgentTools

with demo() as ts, replay("openai_agents") as endpoint:
    client = openai.AsyncOpenAI(base_url=f"{endpoint.url}/v1", api_key="replay")
    model = OpenAIResponsesModel(model="gpt-5.4", openai_client=client)
    tools = AgentTools(ts, token())  # search_tools + pinned; found tools are appended
    agent = Agent(name="support", instructions="Help the customer.", model=model, tools=tools.tools)
    ask = "Where is order 94218? Refund it in full."
    result = Runner.run_sync(agent, ask, run_config=tools.run_config())
    for item in result.new_items:
        raw = item.raw_item
        detail = raw.get("output") if isinstance(raw, dict) else getattr(raw, "arguments", "")
        print(item.type, getattr(raw, "name", ""), detail)
    print("final:", result.final_output)
    print("tools now:", [t.name for t in tools.tools], tools.session.report())
