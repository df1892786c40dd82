"""What the run executor needs from an agent adapter: an ACP transport to talk over.

An adapter is started by the runtime for one run and gives the host its end of an ACP
transport (dict messages). The in-process Claude adapter links an ACP agent object with a
memory transport pair; subprocess agents wrap the child's stdio in a line transport.
``aclose()`` must end everything the adapter started (idempotent).
"""

from __future__ import annotations

from typing import Protocol

from acp._transport import Transport

__all__ = ["AgentProcess"]


class AgentProcess(Protocol):
    """One running agent for one run."""

    name: str

    async def start(self) -> Transport:
        """Start the agent; return the host's end of the ACP transport."""
        ...

    async def aclose(self) -> None:
        """Stop the agent and everything it started; safe to call twice."""
        ...
