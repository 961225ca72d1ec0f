"""Anthropic Messages API: toolscout as the tool search behind ``defer_loading``.

Deferred mode sends every tool the caller is *entitled* to with ``defer_loading: true``
(never one it may not use), its pinned tools in full, and a client-side ``search_tools``
tool. When the model calls that tool, toolscout's discovery answers with a
``tool_result`` holding one ``tool_reference`` block per shortlisted tool, so the API
expands those schemas (and only those) at the end of the context. Plain mode sends only
the pinned tools and the shortlists, appended turn by turn. Either way every
``tool_use`` block runs through ``Toolscout.execute`` with the caller's token and its
result — refusals included — goes back as a ``tool_result`` block.

Shapes follow Anthropic's documentation of tool search with a custom (client-side)
search tool; tested against ``anthropic==2.15.0`` (extra ``toolscout[anthropic]``).
The SDK itself is imported only by :func:`run`'s caller: these functions take and
return plain dicts, or the SDK's response objects.

    tools = AnthropicTools(ts, token)
    reply = tools.run(client, model="claude-sonnet-4-5", messages=[...])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolscout.adapters.session import (
    SEARCH_DESCRIPTION,
    SEARCH_PARAMETERS,
    SEARCH_TOOL,
    Mode,
    Session,
    abstained_text,
    search_answer,
)
from toolscout.adapters.turns import MAX_TURNS, latest_user_text, plain, play
from toolscout.adapters.turns import field as _field

if TYPE_CHECKING:
    from toolscout.service import Caller, Toolscout


class AnthropicTools:
    """The ``tools`` of each Messages request and the answers to the model's tool calls."""

    def __init__(
        self,
        toolscout: Toolscout,
        caller: Caller,
        *,
        mode: Mode | str = Mode.AUTO,
        k: int = 5,
        conversation: str | None = None,
    ) -> None:
        self.session = Session(
            toolscout, caller, fmt="anthropic", k=k, mode=mode, conversation=conversation
        )

    @property
    def mode(self) -> Mode:
        return self.session.mode

    def tools(self, query: str | None = None) -> list[dict[str, Any]]:
        """``tools`` for the next request. Deferred: pinned, the search tool, then every
        other entitled tool deferred (new ones appended). Plain: the tools sent so far
        and the shortlist for ``query`` (the user's latest message) appended."""
        s = self.session
        if s.mode is Mode.PLAIN:
            return s.plain_tools(query)
        if SEARCH_TOOL not in s.sent:
            search = {
                "name": SEARCH_TOOL,
                "description": SEARCH_DESCRIPTION,
                "input_schema": SEARCH_PARAMETERS,
            }
            s.sent.extend([(SEARCH_TOOL, search)])
        pinned = set(s.pinned)
        deferred = [
            (t, {**schema, "defer_loading": True})
            for t, schema in s.rendered([i for i in s.entitled_ids() if i not in pinned])
        ]
        s.sent.extend(deferred)
        return s.sent.tools

    def answer(self, message: Any) -> dict[str, Any] | None:
        """The user message answering every ``tool_use`` block of an assistant
        ``message`` (the SDK's ``Message`` or its dict), or None when it has none."""
        blocks = []
        for block in _field(message, "content", []) or []:
            if _field(block, "type") != "tool_use":
                continue
            call_id, name = _field(block, "id", ""), _field(block, "name", "")
            arguments = _field(block, "input", {})
            if name == SEARCH_TOOL and self.session.mode is Mode.DEFERRED:
                blocks.append(self._search_result(call_id, arguments))
            else:
                result = self.session.execute(name, arguments)
                blocks.extend(result.to_message("anthropic", call_id=call_id)["content"])
        return {"role": "user", "content": blocks} if blocks else None

    def _search_result(self, call_id: str, arguments: Any) -> dict[str, Any]:
        found, problem = search_answer(self.session, arguments)
        if found is None:
            return {
                "type": "tool_result",
                "tool_use_id": call_id,
                "is_error": True,
                "content": problem,
            }
        names = {v: n for n, v in found.names.items()}
        content: list[dict[str, Any]] = [
            {"type": "tool_reference", "tool_name": names[t]} for t in found.ids if t in names
        ]
        if not content:
            content = [{"type": "text", "text": abstained_text(found)}]
        return {"type": "tool_result", "tool_use_id": call_id, "content": content}

    def run(
        self,
        client: Any,
        *,
        messages: list[dict[str, Any]],
        model: str,
        max_tokens: int = 1024,
        max_turns: int = MAX_TURNS,
        **create: Any,
    ) -> Any:
        """Play the conversation until the model stops calling tools: each turn sends
        :meth:`tools`, appends the assistant message and :meth:`answer`'s reply to
        ``messages`` (in place). Returns the last ``Message``."""

        def send() -> Any:
            return client.messages.create(
                model=model,
                max_tokens=max_tokens,
                messages=messages,
                tools=self.tools(latest_user_text(messages)),
                **create,
            )

        def settle(reply: Any) -> bool:
            content = [plain(b) for b in _field(reply, "content", []) or []]
            messages.append({"role": "assistant", "content": content})
            answer = self.answer(reply)
            if answer is not None:
                messages.append(answer)
            return answer is not None

        return play(send, settle, max_turns)
