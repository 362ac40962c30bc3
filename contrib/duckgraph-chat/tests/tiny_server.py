"""A small MCP server over stdio for the bridge's tests that need no duckgraph (and no embedding model):

    python tiny_server.py [--seed-needs-text]

Tools: `echo(text)` answers "echo: <text>"; `crash()` ends the process at once, as a killed server does. With
--seed-needs-text it offers an `extract_knowledge` prompt with a required argument, as another server might.
"""

import os
import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("tiny", instructions="A tiny server for tests.")


@app.tool()
def echo(text: str) -> str:
    """Answer the text back."""
    return f"echo: {text}"


@app.tool()
def crash() -> str:
    """End the server process without answering."""
    os._exit(3)


if "--seed-needs-text" in sys.argv:
    @app.prompt(name="extract_knowledge")
    def extract_knowledge(text: str) -> str:
        """How to store a text."""
        return f"Store this: {text}"


if __name__ == "__main__":
    app.run()
