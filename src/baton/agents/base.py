"""What the run executor needs from an agent adapter: an ACP transport to talk over.

An adapter is started by the runtime for one run and gives the host its end of an ACP
transport (dict messages). The in-process Claude adapter links an ACP agent object with a
memory transport pair; subprocess agents wrap the child's stdio in a line transport.
``start(environment=…)`` adds variables to the agent process's environment (the run's W3C
``TRACEPARENT``, docs/observability.md). ``aclose()`` must end everything the adapter started
(idempotent); ``sandbox`` says where the
agent runs (logged as ``_baton/sandbox``), ``network`` serves its sandbox's proxies (each
connection they see logged as ``_baton/net``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from baton.acp.transport import Transport

if TYPE_CHECKING:
    from baton.sandbox.network import SandboxNetwork
    from baton.sandbox.plan import SandboxPlan

__all__ = ["AgentProcess"]


class AgentProcess(Protocol):
    """One running agent for one run."""

    name: str

    @property
    def sandbox(self) -> SandboxPlan | None:
        """Where the agent runs (baton.sandbox); None: contained only."""
        ...

    @property
    def network(self) -> SandboxNetwork | None:
        """The sandbox's own network (its proxies), when the sandbox isolates it; else None."""
        ...

    async def start(self, *, environment: Mapping[str, str] | None = None) -> Transport:
        """Start the agent, ``environment`` added to its process's; return the host's end of the
        ACP transport."""
        ...

    async def aclose(self) -> None:
        """Stop the agent and everything it started; safe to call twice."""
        ...
