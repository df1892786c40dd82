"""A small MCP server over stdio for the MCP tests and the benchmark (the ``mcp`` SDK's ``MCPServer``).

Tools: ``echo(text)`` answers ``echo: TEXT``; ``token()`` answers ``token=$MCP_TEST_TOKEN`` (the
secret baton's configuration gives this server, and only it); ``agent_env()`` answers whether
the agent's variables (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``) are in this server's
environment; ``crash()`` exits the server in the middle of the call; ``hang()`` never answers.
"""

from __future__ import annotations

import os
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("baton-test")


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
def token() -> str:
    """The token this server was configured with."""
    return f"token={os.environ.get('MCP_TEST_TOKEN', '')}"


@server.tool()
def agent_env() -> str:
    """Which of the agent's variables this server sees."""
    return ",".join(name for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY") if name in os.environ) or "none"


@server.tool()
def crash() -> str:
    """Exit in the middle of the call."""
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answer."""
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    server.run("stdio")
