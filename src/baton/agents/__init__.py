"""The agents baton runs: the registry of known agents, how each is launched, and the seam the
executor drives them through (docs/agents.md).

- :data:`AGENTS` / :func:`get_agent`: the registry (:mod:`baton.agents.registry`): per agent its
  package, launch recipe, tool names and mode matrix; :func:`applies_edits`;
- :class:`AgentProcess` (:mod:`baton.agents.base`): ``start()`` gives the host's end of an ACP
  transport, ``aclose()`` ends everything the agent started;
- :func:`prepare_subprocess_agent` (:mod:`baton.agents.launch`): the checks and the command of a
  subprocess agent; Claude runs in-process (:mod:`baton.agents.claude`).

Everything but :data:`AGENTS_DIR` is imported on first use: the agents' modules are not free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.config import AGENTS_DIR
from baton.lazy import lazy_exports

if TYPE_CHECKING:
    from baton.agents.base import AgentProcess
    from baton.agents.launch import PreparedAgent, prepare_subprocess_agent
    from baton.agents.registry import AGENTS, AgentEntry, applies_edits, get_agent

__all__ = [
    "AGENTS",
    "AGENTS_DIR",
    "AgentEntry",
    "AgentProcess",
    "PreparedAgent",
    "applies_edits",
    "get_agent",
    "prepare_subprocess_agent",
]

_LAZY = {
    "AGENTS": "baton.agents.registry",
    "AgentEntry": "baton.agents.registry",
    "applies_edits": "baton.agents.registry",
    "get_agent": "baton.agents.registry",
    "AgentProcess": "baton.agents.base",
    "PreparedAgent": "baton.agents.launch",
    "prepare_subprocess_agent": "baton.agents.launch",
}


__getattr__ = lazy_exports(__name__, _LAZY)
