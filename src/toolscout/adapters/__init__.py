"""Glue between toolscout and the model APIs and agent SDKs people already use.

Each module is one API or SDK and imports it only inside its functions (its optional
extra names the version tested): ``anthropic`` (Messages: deferred tools answered with
``tool_reference`` blocks, or plain shortlists), ``openai`` (Responses ``tool_search``
answered with ``tool_search_output``, plain Responses and Chat Completions),
``agents`` (OpenAI Agents SDK), ``langgraph`` (langgraph-bigtool ``retrieve_tools`` and
a gateway-only tool node), ``pydantic_ai`` (a toolset) and ``fastmcp`` (a search
transform). They share :mod:`toolscout.adapters.session` (one caller's conversation:
pinned tools, the tier fallback, the cache-stable tool list) and
:mod:`toolscout.adapters.turns` (the provider adapters' turn loop), and run every tool
call through :meth:`toolscout.Toolscout.execute` with the caller's token, nothing else.
:mod:`toolscout.adapters.replay` is a local endpoint that replays recorded model
responses, for tests and examples that must not call a model.
"""
