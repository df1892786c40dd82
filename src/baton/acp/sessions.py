"""The agent's sessions as the host asks about them: ``session/list``, ``session/close`` and
``session/set_config_option``, each only where the agent offers it.

- :func:`list_agent_sessions` follows ``nextCursor`` until the agent gives none (a cursor is
  opaque: it is handed back as received), optionally for one ``cwd``; an agent that does not
  offer ``sessionCapabilities.list`` lists nothing.
- :func:`close_agent_session`: ``session/close`` where ``sessionCapabilities.close`` is offered
  (the agent frees what the session holds); False where it is not.
- :func:`set_config_option`: a value checked against the option the session offers (a
  ``boolean`` option takes ``true``/``false``, sent with ``type: "boolean"``; a ``select`` one
  of its choices), then the agent's answer (its full list of options) kept in the session state.

``session/resume`` and ``session/load`` are :mod:`baton.acp.replay`'s.
"""

from __future__ import annotations

from typing import Any

from acp.schema import AgentCapabilities, SessionInfo

from baton.acp.session_state import AgentSession
from baton.errors import AgentError

__all__ = ["close_agent_session", "list_agent_sessions", "set_config_option"]

_MAX_PAGES = 1000  # an agent whose cursors never end is an agent error, not a loop


async def list_agent_sessions(
    conn: Any, capabilities: AgentCapabilities | None, cwd: str | None = None
) -> list[SessionInfo]:
    """Every session the agent lists (for ``cwd`` when given), page after page."""
    offered = capabilities.session_capabilities if capabilities is not None else None
    if offered is None or offered.list is None:
        return []
    sessions: list[SessionInfo] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(_MAX_PAGES):
        page = await conn.list_sessions(cwd=cwd, cursor=cursor)
        sessions.extend(page.sessions)
        cursor = page.next_cursor
        if cursor is None:
            return sessions
        if cursor in seen:
            raise AgentError("agent_error", f"session/list handed back cursor {cursor!r} twice")
        seen.add(cursor)
    raise AgentError("agent_error", f"session/list gave more than {_MAX_PAGES} pages")


async def close_agent_session(conn: Any, capabilities: AgentCapabilities | None, session_id: str) -> bool:
    """``session/close`` if the agent offers it; whether it was sent."""
    offered = capabilities.session_capabilities if capabilities is not None else None
    if offered is None or offered.close is None:
        return False
    await conn.close_session(session_id=session_id)
    return True


async def set_config_option(
    conn: Any, session: AgentSession, session_id: str, option_id: str, value: str | bool
) -> AgentSession:
    """Set one of the session's config options (``invalid_argument`` for one it does not offer
    or a value that does not fit it); the agent's answer updates ``session``."""
    checked = session.option_value(option_id, value)
    answer = await conn.set_config_option(config_id=option_id, session_id=session_id, value=checked)
    session.take_response(answer)
    return session
