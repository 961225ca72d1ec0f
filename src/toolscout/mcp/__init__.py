"""The MCP gateway: one MCP server in front of many (see :mod:`toolscout.mcp.server`)."""
