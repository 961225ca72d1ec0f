"""An upstream's questions while it serves ``prompts/get``, ``resources/read`` and
``completion/complete``, on both protocol generations of the caller.

The 2026-07-28 revision lets a server answer only ``tools/call``, ``prompts/get`` and
``resources/read`` with an ``InputRequiredResult`` (their params carry ``inputResponses``
and ``requestState``; no other request's do). So a 2026-07-28 caller gets the upstream's
sampling and elicitation requests as input-required rounds of its ``prompts/get`` and
``resources/read`` (as of ``tools/call``, in ``test_mcp_everything.py``); during
``completion/complete`` it cannot be asked, and the upstream gets an error saying so. A
handshake-era caller is sent each request as it comes, during all three.

The upstream is the published TypeScript SDK's ``McpServer`` (handshake-era, as most
servers are): a prompt that elicits a name, a resource that samples a poem, and a
completion handler that elicits a prefix (and completes with the error if refused).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from _mcp_kit import local_gateway, node_env, node_script
from toolscout.mcp.server import MCPGateway

ASKER = r"""
const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StdioServerTransport } = require("@modelcontextprotocol/sdk/server/stdio.js");
const { ElicitResultSchema, CreateMessageResultSchema, CompleteRequestSchema } =
  require("@modelcontextprotocol/sdk/types.js");

const server = new McpServer({ name: "asker", version: "1.0.0" },
                             { capabilities: { completions: {} } });
const ask = (extra, message, field) => extra.sendRequest({ method: "elicitation/create", params: {
  message, requestedSchema: { type: "object", properties: { [field]: { type: "string" } },
                              required: [field] } } }, ElicitResultSchema);
server.registerPrompt("greet", { description: "Greet someone; asks the user whom" },
  async (extra) => {
    const answer = await ask(extra, "Whom shall I greet?", "name");
    const text = `Greet ${answer.content.name} warmly.`;
    return { messages: [{ role: "user", content: { type: "text", text } }] };
  });
server.registerResource("poem", "asker://poem", { mimeType: "text/plain" }, async (uri, extra) => {
  const answer = await extra.sendRequest({ method: "sampling/createMessage", params: {
    messages: [{ role: "user", content: { type: "text", text: "a poem, please" } }],
    maxTokens: 50 } }, CreateMessageResultSchema);
  const text = `poem: ${answer.content.text}`;
  return { contents: [{ uri: uri.href, mimeType: "text/plain", text }] };
});
server.server.setRequestHandler(CompleteRequestSchema, async (request, extra) => {
  try {
    const answer = await ask(extra, "Which prefix?", "prefix");
    return { completion: { values: [`${answer.content.prefix}-1`], hasMore: false } };
  } catch (e) {
    return { completion: { values: [`refused: ${e.message}`], hasMore: false } };
  }
});
server.connect(new StdioServerTransport());
"""


@pytest.fixture
def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    cmd = node_script(tmp_path / "asker.cjs", ASKER)
    servers = {"asker": {"command": cmd[0], "args": cmd[1:], "env": node_env(),
                         "toolscout": {"scopes": []}}}  # fmt: skip
    yield from local_gateway(servers, tmp_path)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_questions_during_prompts_resources_and_completion(gateway: MCPGateway, mode: str) -> None:
    """``auto`` negotiates 2026-07-28 (input-required rounds); ``legacy`` the handshake era."""
    from mcp import Client
    from mcp.types import (
        CreateMessageResult,
        ElicitResult,
        PromptReference,
        TextContent,
    )

    asked: list[str] = []

    async def sampling(context: Any, params: Any) -> Any:
        asked.append("sampling")
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="roses"), model="m"
        )

    async def elicitation(context: Any, params: Any) -> Any:
        asked.append(params.message)
        field = "name" if "greet" in params.message else "prefix"
        return ElicitResult(action="accept", content={field: "Ada"})

    async def scenario() -> dict[str, Any]:
        async with (
            gateway.running(wait_s=60),
            Client(
                gateway.server, mode=mode,
                sampling_callback=sampling, elicitation_callback=elicitation,
            ) as client,
        ):  # fmt: skip
            prompt = await client.get_prompt("asker/greet")
            poem = await client.read_resource("asker://poem")
            done = await client.complete(
                PromptReference(type="ref/prompt", name="asker/greet"),
                {"name": "x", "value": ""},
            )
            return {"prompt": prompt, "poem": poem, "done": done}

    out = asyncio.run(scenario())
    assert out["prompt"].messages[0].content.text == "Greet Ada warmly."
    assert out["poem"].contents[0].text == "poem: roses"
    values = out["done"].completion.values
    if mode == "legacy":  # a handshake-era caller can be asked during any request
        assert values == ["Ada-1"]
        assert asked == ["Whom shall I greet?", "sampling", "Which prefix?"]
    else:  # 2026-07-28: not during completion/complete; the upstream is told why
        assert asked == ["Whom shall I greet?", "sampling"]
        assert len(values) == 1 and values[0].startswith("refused: "), values
        assert "only in answer to a tools/call, prompts/get or resources/read" in values[0]
    rows = gateway.ts.gateway.audit.read(subject="dev")
    audited = [(r.tool_id, r.status) for r in rows]
    # each request audited once, however many rounds it took
    assert audited.count(("prompt:asker/greet", "ok")) == 1, audited
    assert audited.count(("resource:asker://poem", "ok")) == 1, audited
