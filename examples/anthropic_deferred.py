"""Anthropic Messages with deferred tools: toolscout answers the model's tool searches.

Run: PYTHONPATH=src python examples/anthropic_deferred.py (replays recorded replies)."""

import anthropic
from _demo import demo, replay, token

from toolscout.adapters.anthropic import AnthropicTools

with demo() as ts, replay("anthropic_deferred") as endpoint:
    client = anthropic.Anthropic(base_url=endpoint.url, api_key="replay")
    tools = AnthropicTools(ts, token())  # every entitled tool deferred, + search_tools
    messages = [{"role": "user", "content": "Where is order 94218? Refund it in full."}]
    reply = tools.run(client, model="claude-sonnet-4-5", messages=messages)
    for message in messages[1:]:
        for block in message["content"]:
            shown = block.get("input") or block.get("content") or block.get("text")
            print(message["role"], block["type"], block.get("name", ""), shown)
    print("final:", reply.content[0].text)
    print("tokens:", tools.session.report())
