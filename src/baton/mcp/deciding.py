"""What baton's policy makes of one MCP ``tools/call`` (docs/policy.md "MCP tools").

The call is the tool call ``mcp__SERVER__TOOL`` with the call's arguments as its input. The
Gatekeeper decides it (an MCP tool asks by default); ``ask`` goes to the run's gates
(:data:`AskGate`, bound to the hash of ``{tool_name, input}``), or is a denial where nobody can
be asked. ``deny`` is an error result the agent reads, never a protocol error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import rfc8785

from baton.gates import Decision, Gatekeeper, ToolCall

__all__ = ["AskGate", "McpVerdict", "PolicyDecider", "bound_mcp_hash", "mcp_tool_name"]


def mcp_tool_name(server: str, tool: str) -> str:
    return f"mcp__{server}__{tool}"


def bound_mcp_hash(tool_name: str, arguments: Mapping[str, Any]) -> str:
    """sha256 of the JCS canonical ``{tool_name, input}``: what a gate for the call is bound to."""
    return hashlib.sha256(rfc8785.dumps({"tool_name": tool_name, "input": dict(arguments)})).hexdigest()


@dataclass(frozen=True)
class McpVerdict:
    """``allow`` or ``deny`` (a gate's ``park`` too: the run parks, the call is not made)."""

    behavior: Literal["allow", "deny", "park"]
    reason: str
    message: str
    gate_id: str | None = None


# Opens a gate for a call the policy asks about: (call, decision, bound_input_hash) → verdict.
AskGate = Callable[[ToolCall, Decision, str], Awaitable[McpVerdict]]


class PolicyDecider:
    """Decides MCP calls with the run's Gatekeeper, and its gates for ``ask``."""

    def __init__(self, gatekeeper: Gatekeeper, ask: AskGate | None = None) -> None:
        self.gatekeeper = gatekeeper
        self.ask = ask

    async def __call__(self, server: str, tool: str, arguments: Mapping[str, Any], call_id: str) -> McpVerdict:
        name = mcp_tool_name(server, tool)
        call = ToolCall(tool_name=name, input=dict(arguments), tool_call_id=call_id, kind="other")
        decision = self.gatekeeper.decide(call)
        if decision.behavior == "allow":
            return McpVerdict("allow", decision.reason, decision.message)
        if decision.behavior == "deny":
            return McpVerdict("deny", decision.reason, decision.message)
        if self.ask is None:
            return McpVerdict("deny", "no_human", f"{decision.message} (nobody can be asked here, so this is denied)")
        return await self.ask(call, decision, bound_mcp_hash(name, arguments))
