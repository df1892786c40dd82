"""Bringing back an ACP agent's own session on resume, and tagging what it replays (docs/design.md
"The log", "Runs across processes" → Resume).

:func:`restore_session` opens the session a resumed run continues: ``session/resume`` where the
agent offers it (nothing is replayed), else ``session/load``; ``None`` when the agent offers
neither or refuses (its session is gone), and the run falls back to a new session with the
rebuilt conversation (:class:`AgentRestore`).

``session/load`` makes an agent send the whole conversation again as ``session/update``
notifications before it answers. :class:`ReplayTagger` sits between the agent's transport and
the tap: from an outgoing ``session/load`` request until its response, every incoming
``session/update`` gets ``_meta.baton.replay = true`` (on the update), so the log keeps it but
runner events, usage and conversation rebuilds skip it.

It also marks what an agent says **after its turn ended**: a ``session/update`` that arrives when
a ``session/prompt`` has been answered and the next one is not sent yet gets
``_meta.baton.after_turn = true``. The log keeps it where it came (after the prompt's answer,
before or after the turn's ``_baton/turn_complete``, always before the next prompt), so nothing
is lost and its runner events follow the turn they belong to; the host does not count such a
``usage_update`` as the next turn's (:mod:`baton.acp.session_state` keeps it). An update that
comes after the next prompt was sent cannot be told from that turn's own. These two tags are the only changes it makes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from acp import RequestError
from acp.schema import AgentCapabilities, NewSessionResponse

from baton.acp.extensions import ResumeParams
from baton.acp.transport import Transport

__all__ = ["AgentRestore", "ReplayTagger", "is_after_turn", "restore_session", "tag_after_turn", "tag_replayed"]

_log = logging.getLogger("baton.acp.replay")


@dataclass(frozen=True)
class AgentRestore:
    """What a resumed run of an ACP agent tries first, and what it does if the agent cannot."""

    session_id: str  # the agent's session to resume or load
    fallback_prompt: str  # the first prompt on a new session: the rebuilt conversation
    fallback: ResumeParams  # logged as a second ``_baton/resume`` (path ``rebuilt``) on fallback


async def restore_session(
    conn: Any,
    capabilities: AgentCapabilities | None,
    session_id: str,
    cwd: str,
    meta: dict[str, Any],
    *,
    mcp_servers: list[Any] | None = None,
) -> NewSessionResponse | None:
    """``session/resume`` if offered, else ``session/load`` (its replay tagged by a
    :class:`ReplayTagger` under the tap); ``None`` when neither is offered or the agent refuses."""
    offered = capabilities.session_capabilities if capabilities is not None else None
    mcp_servers = list(mcp_servers or [])
    try:
        if offered is not None and offered.resume is not None:
            resumed = await conn.resume_session(session_id=session_id, cwd=cwd, mcp_servers=mcp_servers, **meta)
        elif capabilities is not None and capabilities.load_session:
            resumed = await conn.load_session(session_id=session_id, cwd=cwd, mcp_servers=mcp_servers, **meta)
        else:
            return None
    except RequestError as exc:
        _log.info("the agent did not restore session %s: %s", session_id, exc)
        return None
    modes = getattr(resumed, "modes", None)
    options = getattr(resumed, "config_options", None)
    return NewSessionResponse(session_id=session_id, modes=modes, config_options=options)


def tag_replayed(message: dict[str, Any]) -> None:
    """Mark a ``session/update`` notification as replayed history."""
    _tag(message, "replay")


def tag_after_turn(message: dict[str, Any]) -> None:
    """Mark a ``session/update`` notification as sent after its turn ended."""
    _tag(message, "after_turn")


def is_after_turn(update: Any) -> bool:
    """Whether an update (a dict, or the SDK's model of one) is marked ``after_turn``."""
    meta = update.get("_meta") if isinstance(update, dict) else getattr(update, "field_meta", None)
    baton = meta.get("baton") if isinstance(meta, dict) else None
    return isinstance(baton, dict) and baton.get("after_turn") is True


def _tag(message: dict[str, Any], name: str) -> None:
    params = message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    if not isinstance(update, dict):
        return
    meta = update.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    baton = meta.get("baton")
    update["_meta"] = {**meta, "baton": {**(baton if isinstance(baton, dict) else {}), name: True}}


class ReplayTagger:
    """A transport wrapper that tags what arrives while a ``session/load`` is being answered,
    and what arrives between a turn's end and the next prompt."""

    def __init__(self, inner: Transport) -> None:
        self._inner = inner
        self._loading: set[Any] = set()  # ids of session/load requests not answered yet
        self._prompts: set[Any] = set()  # ids of session/prompt requests not answered yet
        self._turn_ended = False  # a prompt was answered and no other is in flight

    async def send(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method == "session/load" and "id" in message:
            self._loading.add(message["id"])
        elif method == "session/prompt" and "id" in message:
            self._prompts.add(message["id"])
            self._turn_ended = False
        await self._inner.send(message)

    async def receive(self) -> dict[str, Any] | None:
        message = await self._inner.receive()
        if message is None:
            return message
        if message.get("method") == "session/update":
            if self._loading:
                tag_replayed(message)
            elif self._turn_ended:
                tag_after_turn(message)
        elif "method" not in message and "id" in message:
            self._loading.discard(message["id"])
            if message["id"] in self._prompts:
                self._prompts.discard(message["id"])
                self._turn_ended = not self._prompts
        return message

    async def close(self) -> None:
        await self._inner.close()
