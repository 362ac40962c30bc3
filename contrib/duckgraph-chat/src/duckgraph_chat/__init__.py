"""duckgraph-chat: a terminal chat connecting a local model to an MCP server (duckgraph by default)."""
