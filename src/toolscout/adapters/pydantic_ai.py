"""PydanticAI: toolscout as an agent toolset.

:func:`toolscout_toolset` returns a PydanticAI ``AbstractToolset`` whose tools, listed
anew at every step, are a ``search_tools`` function, the caller's pinned tools and the
tools searches found so far (appended in the order found, so the request's tool list
only grows at its end). Every call goes through ``Toolscout.execute`` with the caller's
token; a refusal comes back to the model as the tool's result. Arguments are validated
by the gateway against the tool's schema, not by PydanticAI. A name the toolset does not
list is PydanticAI's to refuse (it asks the model to retry); it never reaches a tool.

Tested against ``pydantic-ai-slim==2.68.0`` (extra ``toolscout[pydantic-ai]``).

    agent = Agent(model, toolsets=[toolscout_toolset(ts, token)])
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


def toolscout_toolset(
    toolscout: Toolscout, caller: Caller, *, k: int = 5, conversation: str | None = None
) -> Any:
    """A PydanticAI toolset over one caller's entitled tools (see the module's text)."""
    try:
        from pydantic_ai.tools import ToolDefinition
        from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
        from pydantic_core import SchemaValidator, core_schema
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError("pydantic-ai-slim", "pydantic-ai") from exc

    any_args = SchemaValidator(schema=core_schema.any_schema())
    session = Session(
        toolscout, caller, fmt="openai-responses", k=k, mode=Mode.PLAIN, conversation=conversation
    )

    class ToolscoutToolset(AbstractToolset[Any]):
        """The search tool, the pinned tools and the tools found so far."""

        session: Session

        @property
        def id(self) -> str | None:
            return "toolscout"

        def _tool(self, name: str, description: str, schema: dict[str, Any]) -> Any:
            definition = ToolDefinition(
                name=name, description=description, parameters_json_schema=schema
            )
            return ToolsetTool(toolset=self, tool_def=definition, max_retries=1,
                               args_validator=any_args)  # fmt: skip

        async def get_tools(self, ctx: Any) -> dict[str, Any]:
            tools = {SEARCH_TOOL: self._tool(SEARCH_TOOL, SEARCH_DESCRIPTION, SEARCH_PARAMETERS)}
            for schema in self.session.sent.tools:
                name = schema["name"]
                tools[name] = self._tool(name, schema.get("description") or "",
                                         schema["parameters"])  # fmt: skip
            return tools

        async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any,
                            tool: Any) -> Any:  # fmt: skip
            if name == SEARCH_TOOL:
                found, problem = await asyncio.to_thread(search_answer, self.session, tool_args)
                if found is None:
                    return problem
                self.session.load(found)
                if not found.ids:
                    return abstained_text(found)
                names = {v: n for n, v in found.names.items()}
                return "Loaded tools: " + ", ".join(names[t] for t in found.ids if t in names)
            result = await self.session.aexecute(name, tool_args)
            return result.content()

    toolset = ToolscoutToolset()
    toolset.session = session
    return toolset
