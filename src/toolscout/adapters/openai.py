"""OpenAI: the Responses API's client-executed ``tool_search``, and plain tool lists.

:class:`ResponsesTools`, deferred mode: the request carries a ``tool_search`` tool with
``execution: "client"``, the caller's pinned functions in full, and every other
*entitled* function with ``defer_loading: true`` — top level, or grouped in one
``namespace`` per catalog group (``namespaces=True``; ``defer_loading`` then sits on the
functions inside). The model's ``tool_search_call`` is answered with a
``tool_search_output`` item whose ``tools`` are the shortlist toolscout's discovery
chose (at most k). Plain mode sends only the pinned functions and the shortlists,
appended turn by turn. :class:`ChatTools` is plain mode for Chat Completions (which has
no deferred loading: ``auto`` falls back to plain there). Every ``function_call`` runs
through ``Toolscout.execute`` with the caller's token; its result, refusals included,
goes back as a ``function_call_output`` item (Responses) or a ``tool`` message (Chat).

Shapes follow OpenAI's tool search guide and the Python SDK's types; tested against
``openai==3.57.0`` (extra ``toolscout[openai]``). These classes take the SDK's client
and response objects or plain dicts; they never import the SDK.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from toolscout.adapters.session import (
    SEARCH_DESCRIPTION,
    SEARCH_PARAMETERS,
    SEARCH_TOOL,
    Mode,
    Session,
    search_answer,
)
from toolscout.adapters.turns import MAX_TURNS, latest_user_text, plain, play
from toolscout.adapters.turns import field as _field

if TYPE_CHECKING:
    from toolscout.service import Caller, Toolscout

_NAMESPACE_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def namespace_name(group: str) -> str:
    """A catalog group as a namespace name (``tools`` when the card has none)."""
    return _NAMESPACE_CHARS.sub("_", group)[:64] or "tools"


class ResponsesTools:
    """``tools`` for each Responses request and the items answering the model's calls."""

    def __init__(
        self,
        toolscout: Toolscout,
        caller: Caller,
        *,
        mode: Mode | str = Mode.AUTO,
        k: int = 5,
        namespaces: bool = False,
        conversation: str | None = None,
    ) -> None:
        self.session = Session(
            toolscout, caller, fmt="openai-responses", k=k, mode=mode, conversation=conversation
        )
        self.namespaces = namespaces

    @property
    def mode(self) -> Mode:
        return self.session.mode

    def _group(self, tool_id: str) -> str:
        card = self.session.toolscout.catalog.card(tool_id)
        return namespace_name(card.group if card is not None else "")

    def tools(self, query: str | None = None) -> list[dict[str, Any]]:
        """Deferred: pinned functions, ``tool_search`` (client), then every other entitled
        function deferred (new ones appended; a namespace is sent once, when it is first
        needed). Plain: the functions sent so far and the shortlist for ``query``."""
        s = self.session
        if s.mode is Mode.PLAIN:
            return s.plain_tools(query)
        if SEARCH_TOOL not in s.sent:
            search = {
                "type": "tool_search",
                "execution": "client",
                "description": SEARCH_DESCRIPTION,
                "parameters": SEARCH_PARAMETERS,
            }
            s.sent.extend([(SEARCH_TOOL, search)])
        pinned = set(s.pinned)
        rest = s.rendered([i for i in s.entitled_ids() if i not in pinned])
        if not self.namespaces:
            s.sent.extend([(t, {**schema, "defer_loading": True}) for t, schema in rest])
            return s.sent.tools
        groups: dict[str, list[dict[str, Any]]] = {}
        for tool_id, schema in rest:
            groups.setdefault(self._group(tool_id), []).append({**schema, "defer_loading": True})
        s.sent.extend(
            (
                f"namespace:{g}",
                {
                    "type": "namespace",
                    "name": g,
                    "description": f"Tools of the {g} group ({len(fns)}).",
                    "tools": fns,
                },
            )
            for g, fns in groups.items()
        )
        return s.sent.tools

    def answer(self, response: Any) -> list[dict[str, Any]]:
        """The input items answering every ``tool_search_call`` (client) and
        ``function_call`` of a ``response`` (the SDK's ``Response`` or its dict)."""
        out: list[dict[str, Any]] = []
        for item in _field(response, "output", []) or []:
            kind = _field(item, "type")
            call_id = _field(item, "call_id", "") or ""
            if kind == "tool_search_call" and _field(item, "execution") == "client":
                out.append(self._search_output(call_id, _field(item, "arguments", {})))
            elif kind == "function_call":
                result = self.session.execute(_field(item, "name", ""), _field(item, "arguments"))
                out.append(result.to_message("openai-responses", call_id=call_id))
        return out

    def _search_output(self, call_id: str, arguments: Any) -> dict[str, Any]:
        found, _problem = search_answer(self.session, arguments)
        loaded: list[dict[str, Any]] = []
        if found is not None:
            for tool_id, schema in self.session.rendered(found.ids):
                if self.namespaces:
                    g = self._group(tool_id)
                    loaded.append(
                        {
                            "type": "namespace",
                            "name": g,
                            "description": f"Tools of the {g} group.",
                            "tools": [schema],
                        }
                    )
                else:
                    loaded.append(schema)
        # the item has no text field: an abstention is an empty list, a bad query incomplete
        status = "completed" if found is not None else "incomplete"
        return {
            "type": "tool_search_output",
            "call_id": call_id,
            "execution": "client",
            "status": status,
            "tools": loaded,
        }

    def run(
        self,
        client: Any,
        *,
        input: list[dict[str, Any]],
        model: str,
        max_turns: int = MAX_TURNS,
        **create: Any,
    ) -> Any:
        """Play the conversation until the model stops calling tools; ``input`` grows in
        place with the model's output items and the answers. Returns the last ``Response``."""

        def send() -> Any:
            tools = self.tools(latest_user_text(input))
            return client.responses.create(model=model, input=input, tools=tools, **create)

        def settle(response: Any) -> bool:
            input.extend(plain(o) for o in _field(response, "output", []) or [])
            answers = self.answer(response)
            input.extend(answers)
            return bool(answers)

        return play(send, settle, max_turns)


class ChatTools:
    """Chat Completions: plain shortlists as ``tools``, ``tool`` messages as answers."""

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
            toolscout,
            caller,
            fmt="openai",
            k=k,
            mode=mode,
            deferred=False,
            conversation=conversation,
        )

    def tools(self, query: str | None = None) -> list[dict[str, Any]]:
        return self.session.plain_tools(query)

    def answer(self, completion: Any) -> list[dict[str, Any]]:
        """The ``tool`` messages answering the first choice's tool calls."""
        choices = _field(completion, "choices", []) or []
        message = _field(choices[0], "message") if choices else None
        out: list[dict[str, Any]] = []
        for call in _field(message, "tool_calls", []) or []:
            fn = _field(call, "function")
            result = self.session.execute(_field(fn, "name", ""), _field(fn, "arguments"))
            out.append(result.to_message("openai", call_id=_field(call, "id", "")))
        return out

    def run(
        self,
        client: Any,
        *,
        messages: list[dict[str, Any]],
        model: str,
        max_turns: int = MAX_TURNS,
        **create: Any,
    ) -> Any:
        """Play the conversation until the model stops calling tools (``messages`` grows
        in place). Returns the last ``ChatCompletion``."""

        def send() -> Any:
            tools = self.tools(latest_user_text(messages))
            return client.chat.completions.create(
                model=model, messages=messages, tools=tools, **create
            )

        def settle(completion: Any) -> bool:
            messages.append(plain(_field(_field(completion, "choices")[0], "message")))
            answers = self.answer(completion)
            messages.extend(answers)
            return bool(answers)

        return play(send, settle, max_turns)
