"""A small MCP server for the MCP tests and the benchmark (the ``mcp`` SDK's ``MCPServer``):
``python mcp_test_server.py`` over stdio; ``python mcp_test_server.py streamable-http|sse PORT``
on 127.0.0.1:PORT (paths ``/mcp`` and ``/sse``).

Tools: ``echo(text)`` answers ``echo: TEXT``; ``token()`` answers ``token=$MCP_TEST_TOKEN`` (the
secret baton's configuration gives this server, and only it); ``agent_env()`` answers whether
the agent's variables (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``) are in this server's
environment; ``header()`` answers ``authorization=VALUE`` of the request's ``Authorization``
header (over HTTP; ``none`` over stdio); ``crash()`` exits the server in the middle of the call;
``hang()`` never answers.
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import Context, MCPServer

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
def header(ctx: Context) -> str:
    """The Authorization header the call came with."""
    headers = ctx.headers or {}
    return f"authorization={headers.get('authorization', 'none')}"


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
    if len(sys.argv) > 2 and sys.argv[1] in ("sse", "streamable-http"):
        server.run(sys.argv[1], host="127.0.0.1", port=int(sys.argv[2]))  # type: ignore[call-overload]
    else:
        server.run("stdio")
