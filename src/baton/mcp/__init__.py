"""MCP servers per run, under baton's policy (docs/agents.md "MCP servers").

baton starts a run's stdio servers itself (outside the agent's sandbox, each with an environment
of its own) and reaches its URL servers itself; the agent is handed one streamable-HTTP
endpoint per server, served by :class:`McpProxy` on 127.0.0.1 (and inside a sandbox's network
namespace). Every ``tools/call`` is a tool call ``mcp__SERVER__TOOL`` decided by the Gatekeeper
(:mod:`baton.mcp.deciding`), logged as ``_baton/mcp_called`` / ``_baton/mcp_finished``.
"""

from __future__ import annotations

from baton.mcp.deciding import AskGate, McpVerdict, PolicyDecider, mcp_tool_name
from baton.mcp.proxy import McpCall, McpProxy
from baton.mcp.servers import mcp_entry_is_named, repository_mcp_servers, resolve_mcp_servers

__all__ = [
    "AskGate",
    "McpCall",
    "McpProxy",
    "McpVerdict",
    "PolicyDecider",
    "mcp_entry_is_named",
    "mcp_tool_name",
    "repository_mcp_servers",
    "resolve_mcp_servers",
]
