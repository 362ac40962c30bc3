# Claude Code: run one of these in your project (add `--scope user` for every project).
# The default tools:
claude mcp add duckgraph -- /path/to/.venv/bin/duckgraph serve
# In place of the reference memory server (@modelcontextprotocol/server-memory):
claude mcp add duckgraph-memory -e DUCKGRAPH_TOOLS=memory -- /path/to/.venv/bin/duckgraph serve
# A running `duckgraph serve --http` with DUCKGRAPH_HTTP_TOKEN set (the same variable in this shell):
claude mcp add --transport http duckgraph-http http://127.0.0.1:8765/mcp --header "Authorization: Bearer ${DUCKGRAPH_HTTP_TOKEN}"
