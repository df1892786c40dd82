"""Tagging history an agent replays on ``session/load`` (DESIGN.md "The log").

``session/load`` makes an agent send the whole conversation again as ``session/update``
notifications before it answers. :class:`ReplayTagger` sits between the agent's transport and
the tap: from an outgoing ``session/load`` request until its response, every incoming
``session/update`` gets ``_meta.baton.replay = true`` (on the update), so the log keeps it but
runner events, usage and conversation rebuilds skip it. This is the only change it makes.
"""

from __future__ import annotations

from typing import Any

from acp._transport import Transport

__all__ = ["ReplayTagger", "tag_replayed"]


def tag_replayed(message: dict[str, Any]) -> None:
    """Mark a ``session/update`` notification as replayed history."""
    params = message.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    if not isinstance(update, dict):
        return
    meta = update.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    baton = meta.get("baton")
    update["_meta"] = {**meta, "baton": {**(baton if isinstance(baton, dict) else {}), "replay": True}}


class ReplayTagger:
    """A transport wrapper that tags what arrives while a ``session/load`` is being answered."""

    def __init__(self, inner: Transport) -> None:
        self._inner = inner
        self._loading: set[Any] = set()  # ids of session/load requests not answered yet

    async def send(self, message: dict[str, Any]) -> None:
        if message.get("method") == "session/load" and "id" in message:
            self._loading.add(message["id"])
        await self._inner.send(message)

    async def receive(self) -> dict[str, Any] | None:
        message = await self._inner.receive()
        if message is None or not self._loading:
            return message
        if message.get("method") == "session/update":
            tag_replayed(message)
        elif "method" not in message and message.get("id") in self._loading:
            self._loading.discard(message.get("id"))
        return message

    async def close(self) -> None:
        await self._inner.close()
