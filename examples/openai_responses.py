"""OpenAI Responses API with client-executed tool_search: toolscout answers each search.

Run: PYTHONPATH=src python examples/openai_responses.py (replays recorded replies)."""

import openai
from _demo import demo, replay, token

from toolscout.adapters.openai import ResponsesTools

with demo() as ts, replay("openai_responses") as endpoint:
    client = openai.OpenAI(base_url=f"{endpoint.url}/v1", api_key="replay")
    tools = ResponsesTools(ts, token())  # entitled functions deferred, + tool_search
    items = [{"role": "user", "content": "Where is order 94218? Refund it in full."}]
    response = tools.run(client, model="gpt-5.4", input=items)
    for item in items[1:]:
        detail = item.get("arguments") or item.get("output") or item.get("tools")
        if item["type"] == "tool_search_output":
            detail = [tool["name"] for tool in detail]
        print(item["type"], item.get("name", ""), detail)
    print("final:", response.output_text)
    print("tokens:", tools.session.report())
