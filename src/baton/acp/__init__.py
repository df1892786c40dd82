"""The connection layer between baton and an agent: the host-side ACP client (``BatonHost``),
the tapping transport that logs every message (``TappingTransport``), session restore on
resume (``restore_session``), baton's ``_baton/*`` extensions (``notification``) and the
SDK's transport behind baton's own name (:mod:`baton.acp.transport`).

Imported on first use: the host pulls in the ACP SDK and the agents' registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.lazy import lazy_exports

if TYPE_CHECKING:
    from baton.acp.extensions import notification
    from baton.acp.host import AskHuman, BatonHost
    from baton.acp.replay import AgentRestore, restore_session
    from baton.acp.tap import TappingTransport
    from baton.acp.transport import Transport
    from baton.events.entry import EntrySink

__all__ = [
    "AgentRestore",
    "AskHuman",
    "BatonHost",
    "EntrySink",
    "TappingTransport",
    "Transport",
    "notification",
    "restore_session",
]

_LAZY = {
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
