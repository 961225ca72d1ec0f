"""Executors: what actually runs a tool (Python callables, HTTP endpoints, upstream MCP)."""
