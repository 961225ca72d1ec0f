"""OpenAI Chat Completions (no deferred loading): each request carries the shortlist.

Run: PYTHONPATH=src python examples/openai_chat.py (replays recorded replies)."""

import openai
from _demo import demo, replay, token

from toolscout.adapters.openai import ChatTools

with demo() as ts, replay("openai_chat") as endpoint:
    client = openai.OpenAI(base_url=f"{endpoint.url}/v1", api_key="replay")
    tools = ChatTools(ts, token())  # pinned tools + the shortlist of each request
    messages = [{"role": "user", "content": "Where is order 94218? Refund it in full."}]
    completion = tools.run(client, model="gpt-5.4", messages=messages)
    for message in messages[1:]:
        calls = [c["function"]["name"] for c in message.get("tool_calls") or []]
        print(message["role"], calls or message.get("content"))
    print("final:", completion.choices[0].message.content)
    print("tokens:", tools.session.report())
