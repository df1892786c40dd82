"""An ACP agent over stdio (plain JSON-RPC, no ACP SDK) that calls MCP tools, for the MCP tests.

``python mcp_acp_agent.py [nohttp]`` answers ``initialize`` (offering ``mcpCapabilities.http``
unless ``nohttp``), keeps the ``mcpServers`` of ``session/new``, and on ``session/prompt`` runs
each line of the prompt:

- ``call SERVER TOOL {JSON arguments}``: calls the tool on the server's endpoint with the ``mcp``
  SDK's client and says ``SERVER.TOOL error=BOOL: TEXT``;
- ``env``: says which of ``MCP_TEST_TOKEN`` and the token's value its own environment holds
  (``env: none`` when neither);
- ``servers``: says the name, transport and URL of each server it was handed.

It ends the turn with ``end_turn``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from mcp.client import Client

TOKEN = "mcp-test-token-0123456789abcdef"  # the secret the tests' configuration gives the server


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def say(session: str, text: str) -> None:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session, "update": update}})


async def call(url: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    async with Client(url, cache=None) as client:
        result = await client.call_tool(tool, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    return bool(result.is_error), text


def run_line(session: str, line: str, servers: dict[str, dict[str, Any]]) -> None:
    words = line.split(" ", 3)
    if words[0] == "call" and len(words) >= 3:
        server, tool = words[1], words[2]
        arguments = json.loads(words[3]) if len(words) > 3 else {}
        try:
            is_error, text = asyncio.run(call(servers[server]["url"], tool, arguments))
        except Exception as exc:  # a transport failure is what the agent reports
            is_error, text = True, f"{type(exc).__name__}: {exc}"
        say(session, f"{server}.{tool} error={str(is_error).lower()}: {text}")
    elif words[0] == "env":
        held = [name for name in ("MCP_TEST_TOKEN",) if name in os.environ]
        held += ["the token"] if any(TOKEN in value for value in os.environ.values()) else []
        say(session, "env: " + (", ".join(held) or "none"))
    elif words[0] == "servers":
        say(
            session,
            "servers: " + ", ".join(f"{name} {kept.get('type')} {kept.get('url')}" for name, kept in servers.items()),
        )


def main(argv: list[str]) -> int:
    http = "nohttp" not in argv
    servers: dict[str, dict[str, Any]] = {}
    for raw in sys.stdin:
        message = json.loads(raw)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            capabilities = {"loadSession": False, "mcpCapabilities": {"http": http, "sse": False}}
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {"protocolVersion": 1, "agentCapabilities": capabilities},
                }
            )
        elif method == "session/new":
            servers = {server["name"]: server for server in params.get("mcpServers") or []}
            send({"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": "mcp-session-1"}})
        elif method == "session/prompt":
            session = params["sessionId"]
            text = "".join(block.get("text", "") for block in params.get("prompt") or [])
            for line in text.splitlines():
                if line.strip():
                    run_line(session, line.strip(), servers)
            send({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn"}})
        elif request_id is not None and method is not None:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no {method}"}})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
