"""PydanticAI: an agent whose toolset is toolscout (search, pinned and found tools).

Run: PYTHONPATH=src python examples/pydantic_ai_agent.py (replays recorded replies)."""

from _demo import demo, replay, token
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from toolscout.adapters.pydantic_ai import toolscout_toolset

with demo() as ts, replay("pydantic_ai") as endpoint:
    provider = OpenAIProvider(base_url=f"{endpoint.url}/v1", api_key="replay")
    toolset = toolscout_toolset(ts, token())  # every call goes through the gateway
    agent = Agent(OpenAIChatModel("gpt-5.4", provider=provider), toolsets=[toolset])
    result = agent.run_sync("Where is order 94218?")
    for message in result.all_messages():
        for part in message.parts:
            detail = getattr(part, "args", None) or getattr(part, "content", "")
            print(part.part_kind, getattr(part, "tool_name", ""), detail)
    print("tokens:", toolset.session.report())
