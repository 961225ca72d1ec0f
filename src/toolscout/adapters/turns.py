"""The turn loop the provider adapters share, and the helpers it reads replies with.

Anthropic Messages, OpenAI Responses and Chat Completions differ in what they send and how
the answers look, not in the loop: send the conversation with this turn's tools, append
the model's reply, answer its tool calls, repeat until it calls none. :func:`play` is that
loop; each adapter passes its own ``send`` and ``settle``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from toolscout.errors import ConfigError

#: turns a ``run`` plays before it gives up
MAX_TURNS = 12

R = TypeVar("R")


def field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` of a dict, else the attribute of an SDK object."""
    return obj.get(name, default) if isinstance(obj, Mapping) else getattr(obj, name, default)


def plain(item: Any) -> dict[str, Any]:
    """An SDK object (a content block, an output item, a message) as the dict to send back."""
    if isinstance(item, dict):
        return item
    dumped: dict[str, Any] = item.model_dump(exclude_none=True)
    return dumped


def latest_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The text of the latest user message that has text (not only tool results): a
    string content, or its text parts joined."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [str(p["text"]) for p in content or [] if isinstance(p, Mapping) and "text" in p]
        if texts:
            return " ".join(texts)
    return None


def play(send: Callable[[], R], settle: Callable[[R], bool], max_turns: int = MAX_TURNS) -> R:
    """Call ``send`` (one model request) until ``settle`` — which appends the reply and the
    answers to its calls to the conversation — says the model called no tool; return that
    last reply."""
    for _ in range(max_turns):
        reply = send()
        if not settle(reply):
            return reply
    raise ConfigError(f"the model still called tools after max_turns={max_turns} turns")
