"""The connection layer between baton and an agent: the host-side ACP client (``BatonHost``),
the tapping transport that logs every message (``TappingTransport``), session restore on
resume (``restore_session``), the agent's sessions (``list_agent_sessions``,
``close_agent_session``, ``set_config_option``, the state its updates describe:
``AgentSession``), ``$/cancel_request`` (``CancellableTransport``), baton's ``_baton/*``
extensions (``notification``) and the SDK's transport behind baton's own name
(:mod:`baton.acp.transport`).

Imported on first use: the host pulls in the ACP SDK and the agents' registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.lazy import lazy_exports

if TYPE_CHECKING:
    from baton.acp.cancel import CancellableTransport
    from baton.acp.extensions import notification
    from baton.acp.host import AskHuman, BatonHost
    from baton.acp.replay import AgentRestore, restore_session
    from baton.acp.session_state import AgentSession
    from baton.acp.sessions import close_agent_session, list_agent_sessions, set_config_option
    from baton.acp.tap import TappingTransport
    from baton.acp.transport import Transport
    from baton.events.entry import EntrySink

__all__ = [
    "AgentRestore",
    "AgentSession",
    "AskHuman",
    "BatonHost",
    "CancellableTransport",
    "EntrySink",
    "TappingTransport",
    "Transport",
    "close_agent_session",
    "list_agent_sessions",
    "notification",
    "restore_session",
    "set_config_option",
]

_LAZY = {
    "AgentSession": "baton.acp.session_state",
    "CancellableTransport": "baton.acp.cancel",
    "close_agent_session": "baton.acp.sessions",
    "list_agent_sessions": "baton.acp.sessions",
    "set_config_option": "baton.acp.sessions",
    "notification": "baton.acp.extensions",
    "AskHuman": "baton.acp.host",
    "BatonHost": "baton.acp.host",
    "AgentRestore": "baton.acp.replay",
    "restore_session": "baton.acp.replay",
    "EntrySink": "baton.events.entry",
    "TappingTransport": "baton.acp.tap",
    "Transport": "baton.acp.transport",
}


__getattr__ = lazy_exports(__name__, _LAZY)
