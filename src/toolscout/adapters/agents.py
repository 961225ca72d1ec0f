"""OpenAI Agents SDK: toolscout as the agent's tool provider.

:class:`AgentTools` gives an ``Agent`` a live ``tools`` list: a ``search_tools``
function, the caller's pinned tools, and — appended as searches find them, so the
request's tool list only ever grows at its end — one ``FunctionTool`` per shortlisted
tool. Each of those runs through ``Toolscout.execute`` with the caller's token. The SDK
runner does not execute client-side ``tool_search`` calls, so the search is an ordinary
function tool here. :meth:`AgentTools.run_config` makes a call of a tool the agent does
not hold come back to the model as the gateway's refusal (audited) instead of an
exception, or as "load it first" when the caller may use it.

Tested against ``openai-agents==0.24.0`` (extra ``toolscout[agents]``).

    tools = AgentTools(ts, token)
    agent = Agent(name="support", model=model, tools=tools.tools)
    result = Runner.run_sync(agent, "Where is order 94218?", run_config=tools.run_config())
"""

from __future__ import annotations

import asyncio
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
from toolscout.errors import MissingExtraError

if TYPE_CHECKING:
    from toolscout.service import Caller, Toolscout


def _sdk() -> Any:
    try:
        import agents
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError("openai-agents", "agents") from exc
    return agents


class AgentTools:
    """A live tool list for an Agents SDK ``Agent``, backed by toolscout."""

    def __init__(
        self, toolscout: Toolscout, caller: Caller, *, k: int = 5, conversation: str | None = None
    ) -> None:
        self.session = Session(
            toolscout, caller, fmt="openai-responses", k=k, mode=Mode.PLAIN,
            conversation=conversation,
        )  # fmt: skip
        self._sdk = _sdk()
        self.tools: list[Any] = [self._search_tool()]
        self.tools += [self._function(schema) for _, schema in self.session.rendered(
            list(self.session.pinned))]  # fmt: skip

    def _search_tool(self) -> Any:
        async def invoke(ctx: Any, raw: str) -> str:
            from toolscout.adapters.session import parse_arguments

            found, problem = await asyncio.to_thread(
                search_answer, self.session, parse_arguments(raw)
            )
            if found is None:
                return problem
            for _, schema in self.session.load(found):
                self.tools.append(self._function(schema))
            if not found.ids:
                return abstained_text(found)
            names = {v: n for n, v in found.names.items()}
            return "Loaded tools: " + ", ".join(names[t] for t in found.ids if t in names)

        return self._sdk.FunctionTool(
            name=SEARCH_TOOL,
            description=SEARCH_DESCRIPTION,
            params_json_schema=SEARCH_PARAMETERS,
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    def _function(self, schema: dict[str, Any]) -> Any:
        name = schema["name"]

        async def invoke(ctx: Any, raw: str) -> str:
            result = await self.session.aexecute(name, raw)
            return result.content()

        return self._sdk.FunctionTool(
            name=name,
            description=schema.get("description") or "",
            params_json_schema=schema["parameters"],
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    def _not_held(self, args: Any) -> str | None:
        if getattr(args, "kind", None) != "tool_not_found":
            return None
        refused = self.session.refusal(str(args.tool_name))
        if refused is not None:
            return refused.content()
        return f"{args.tool_name} is not loaded: call {SEARCH_TOOL} with select:{args.tool_name}"

    def run_config(self, **options: Any) -> Any:
        """A ``RunConfig``: unheld tool calls answered by the gateway, tracing off unless
        ``options`` say otherwise (traces would leave the machine)."""
        options.setdefault("tracing_disabled", True)
        return self._sdk.RunConfig(
            tool_not_found_behavior="return_error_to_model",
            tool_error_formatter=self._not_held,
            **options,
        )
