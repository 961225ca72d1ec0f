"""LangGraph: toolscout behind langgraph-bigtool's ``create_agent``, and a tool node
that executes only through the gateway.

:meth:`LangGraphTools.retrieve_tools` is a ``retrieve_tools_function`` for bigtool's
``create_agent``: it returns the ids of at most k *entitled* tools toolscout's discovery
chose. :attr:`LangGraphTools.registry` holds the caller's entitled tools only, each a
``StructuredTool`` whose call goes through ``Toolscout.execute`` with the caller's token.
bigtool's own tool node runs any registered tool, retrieved or not; ours
(:meth:`LangGraphTools.tool_node`, used by :meth:`LangGraphTools.create_agent`, which
builds bigtool's loop over bigtool's ``State``) runs a call only if its tool was
retrieved in this conversation or is pinned, and hands every other name to the gateway,
whose refusal comes back as the ``ToolMessage``.

Tested against ``langgraph==1.2.24``, ``langgraph-bigtool==0.0.3``,
``langchain-core==1.8.3``, ``langchain-openai==1.7.4`` in the tests (extra
``toolscout[langgraph]``).

    tools = LangGraphTools(ts, token)
    agent = tools.create_agent(llm).compile()
    agent.invoke(tools.initial_state("Where is order 94218?"))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolscout.adapters.session import Mode, Session
from toolscout.errors import MissingExtraError

if TYPE_CHECKING:
    from toolscout.service import Caller, Toolscout


def _require() -> None:
    try:
        import langchain_core  # noqa: F401
        import langgraph  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError("langgraph", "langgraph") from exc


class LangGraphTools:
    """A caller's entitled tools for LangGraph, retrieved by toolscout."""

    def __init__(
        self, toolscout: Toolscout, caller: Caller, *, k: int = 5, conversation: str | None = None
    ) -> None:
        _require()
        self.session = Session(
            toolscout, caller, fmt="langchain", k=k, mode=Mode.PLAIN, conversation=conversation
        )
        self._registry: dict[str, Any] | None = None

    # -- retrieval -----------------------------------------------------------------
    def retrieve_tools(self, query: str) -> list[str]:
        """Retrieve the tools for a task: describe it in a few words, or write
        select:<tool name> for a tool you know by name."""
        found = self.session.search(query)
        self.session.load(found)  # what the model is now shown, for the token figures
        return list(found.ids)

    @property
    def registry(self) -> dict[str, Any]:
        """Tool id → ``StructuredTool`` for every tool the caller is entitled to."""
        if self._registry is None:
            ids = self.session.entitled_ids()
            self._registry = {t: self._tool(t, s) for t, s in self.session.rendered(ids)}
        return self._registry

    def _tool(self, tool_id: str, schema: Mapping[str, Any]) -> Any:
        from langchain_core.tools import StructuredTool

        fn = schema["function"]
        name = fn["name"]

        def call(**arguments: Any) -> str:
            return self._run(name, arguments)

        return StructuredTool(
            name=name,
            description=fn.get("description") or name,
            args_schema=fn["parameters"],
            func=call,
        )

    def initial_state(self, message: str) -> dict[str, Any]:
        """bigtool's input state: the user's message, the pinned tools already bound."""
        return {"messages": [("user", message)], "selected_tool_ids": list(self.session.pinned)}

    # -- execution -----------------------------------------------------------------
    def _retrieved(self, extra: Any = ()) -> set[str]:
        return {*self.session.loaded, *self.session.pinned, *(extra or ())}

    def _run(self, name: str, arguments: Any, retrieved: Any = ()) -> str:
        """One call: executed through the gateway if its tool was retrieved (or pinned);
        an entitled tool not retrieved is not run; any other name gets the gateway's
        refusal (audited)."""
        refused = self.session.refusal(name)
        if refused is not None:
            return refused.content()
        tool_id = self.session.toolscout.catalog.resolve(name)
        if tool_id not in self._retrieved(retrieved):
            return f"refused: not_retrieved: retrieve {name} first (select:{name})"
        return self.session.execute(name, arguments).content()

    def tool_node(self) -> Any:
        """A graph node running the last AI message's tool calls (or a list of calls, as
        bigtool sends them) through :meth:`_run`; one ``ToolMessage`` per call."""
        from langchain_core.messages import AIMessage, ToolMessage
        from langchain_core.runnables import RunnableLambda

        def run(payload: Any) -> dict[str, Any]:
            retrieved: list[str] = []
            if isinstance(payload, list):
                calls = payload
            else:
                messages = payload.get("messages", [])
                last = messages[-1] if messages else None
                calls = list(last.tool_calls) if isinstance(last, AIMessage) else []
                retrieved = list(payload.get("selected_tool_ids", []))
            out = []
            for call in calls:
                content = self._run(call["name"], call.get("args", {}), retrieved)
                status = "error" if content.startswith(("refused:", "error:")) else "success"
                out.append(ToolMessage(content, tool_call_id=call["id"], name=call["name"],
                                       status=status))  # fmt: skip
            return {"messages": out}

        return RunnableLambda(run, name="toolscout_tools")

    def create_agent(self, llm: Any) -> Any:
        """bigtool's agent loop (model → retrieve tools / run tools → model) over
        :meth:`retrieve_tools`, :attr:`registry` and :meth:`tool_node`; returns the
        ``StateGraph`` (bigtool's ``State``). Built here rather than by bigtool 0.0.3's
        ``create_agent``, which calls ``ToolNode.inject_tool_args``, gone from
        langgraph-prebuilt 1.1 — and whose tool node would run unretrieved tools."""
        from langchain_core.messages import AIMessage, ToolMessage
        from langchain_core.tools import StructuredTool
        from langgraph.graph import END, StateGraph
        from langgraph_bigtool.graph import State

        retrieve = StructuredTool.from_function(self.retrieve_tools)
        tools = self.tool_node()

        def agent(state: Any) -> dict[str, Any]:
            bound = [self.registry[t] for t in state["selected_tool_ids"] if t in self.registry]
            return {"messages": [llm.bind_tools([retrieve, *bound]).invoke(state["messages"])]}

        def act(state: Any) -> dict[str, Any]:
            last = state["messages"][-1]
            searches = [c for c in last.tool_calls if c["name"] == retrieve.name]
            others = [c for c in last.tool_calls if c["name"] != retrieve.name]
            messages: list[Any] = []
            found: list[str] = []
            for call in searches:
                ids = self.retrieve_tools(str(call["args"].get("query", "")))
                names = [self.registry[t].name for t in ids if t in self.registry]
                messages.append(ToolMessage(f"Available tools: {names}", tool_call_id=call["id"]))
                found.extend(ids)
            if others:
                retrieved = [*state["selected_tool_ids"], *found]
                messages += tools.invoke({"messages": [AIMessage("", tool_calls=others)],
                                          "selected_tool_ids": retrieved})["messages"]  # fmt: skip
            return {"messages": messages, "selected_tool_ids": found}

        def route(state: Any) -> str:
            last = state["messages"][-1]
            return "act" if isinstance(last, AIMessage) and last.tool_calls else END

        builder = StateGraph(State)
        builder.add_node("agent", agent)
        builder.add_node("act", act)
        builder.set_entry_point("agent")
        builder.add_conditional_edges("agent", route, path_map=["act", END])
        builder.add_edge("act", "agent")
        return builder
