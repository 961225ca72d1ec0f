"""LangGraph with langgraph-bigtool: toolscout retrieves, the gateway executes.

Run: PYTHONPATH=src python examples/langgraph_bigtool.py (replays recorded replies)."""

from _demo import demo, replay, token
from langchain_openai import ChatOpenAI

from toolscout.adapters.langgraph import LangGraphTools

with demo() as ts, replay("langgraph") as endpoint:
    llm = ChatOpenAI(model="gpt-5.4", base_url=f"{endpoint.url}/v1", api_key="replay")
    tools = LangGraphTools(ts, token())  # registry: entitled tools only
    agent = tools.create_agent(llm).compile()  # retrieve_tools = toolscout discovery
    state = agent.invoke(tools.initial_state("Where is order 94218? Refund it in full."))
    for message in state["messages"][1:]:
        calls = [(c["name"], c["args"]) for c in getattr(message, "tool_calls", [])]
        print(message.type, calls or message.content)
    print("bound tools:", state["selected_tool_ids"])
    print("tokens:", tools.session.report())
