"""Gate changes across runs, for ``GET /v1/gates/events``: one reader of the store per server.

Gates are opened and decided by any process that shares the store (a run executing here or
elsewhere, ``baton approve`` in another shell, another server), so the store is what is
watched: while at least one stream is open, one task lists the pending gates every
``poll_seconds`` (at once after a decision made through this server) and hands each change
to every stream — a gate that appeared (``pending``) and a gate that left the pending list
(read again: its decision). Each stream keeps what its caller may see.

A stream starts with a ``snapshot`` of the pending gates taken after the reader has its own
starting point, so a gate opened in between is in one or the other (possibly both: a client
applies a gate object by its ``id`` and ``status``, which makes the overlap harmless).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from baton.errors import BatonError

if TYPE_CHECKING:
    from baton.gates.ledger import GateRecord
    from baton.runs.queries import Runs

__all__ = ["GateChange", "GateWatch"]

_log = logging.getLogger("baton.server")
_QUEUE: Final = 1024


@dataclass(frozen=True)
class GateChange:
    gate: GateRecord
    run_owner: str | None
    run_task_id: str | None


class GateWatch:
    def __init__(self, poll_seconds: float = 0.2) -> None:
        self._poll = poll_seconds
        self._subscribers: set[asyncio.Queue[GateChange | None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._wake = asyncio.Event()
        self._runs: dict[str, tuple[str | None, str | None]] = {}  # run id → (owner, task id); never change

    async def aclose(self) -> None:
        """Stop the reader (the server shuts down)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def poke(self) -> None:
        """Look now (a decision was just recorded here)."""
        self._wake.set()

    async def changes(self, runs: Runs) -> AsyncGenerator[GateChange | None, None]:
        """Every gate change from now on; the first item is None once the reader has its start
        (take the snapshot then). Ends when the reader fails (the store went away)."""
        queue: asyncio.Queue[GateChange | None] = asyncio.Queue(_QUEUE)
        self._subscribers.add(queue)
        if self._task is None or self._task.done():
            self._ready = asyncio.Event()
            self._task = asyncio.create_task(self._read(runs), name="baton-gate-watch")
        try:
            await self._ready.wait()
            yield None
            while True:
                change = await queue.get()
                if change is None:
                    return
                yield change
        finally:
            self._subscribers.discard(queue)

    async def owner_of(self, runs: Runs, run_id: str) -> tuple[str | None, str | None]:
        known = self._runs.get(run_id)
        if known is None:
            record = await runs.get_run(run_id)
            known = self._runs[run_id] = (record.owner, record.task_id)
        return known

    async def _read(self, runs: Runs) -> None:
        try:
            pending = {gate.id: gate for gate in await runs.gates(status="pending")}
            self._ready.set()
            while self._subscribers:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._poll)
                self._wake.clear()
                now = {gate.id: gate for gate in await runs.gates(status="pending")}
                changed: list[GateRecord] = [gate for gate_id, gate in now.items() if gate_id not in pending]
                for gate_id in pending.keys() - now.keys():
                    changed.append(await runs.gate(gate_id))
                pending = now
                for gate in sorted(changed, key=lambda g: g.id):
                    owner, task_id = await self.owner_of(runs, gate.run_id)
                    self._publish(GateChange(gate, owner, task_id))
        except BatonError as exc:  # the store went away: the streams end, the next starts anew
            _log.warning("gate watch stopped: %s", exc)
        finally:
            self._ready.set()
            for queue in list(self._subscribers):
                self._publish_to(queue, None)

    def _publish(self, change: GateChange) -> None:
        for queue in list(self._subscribers):
            self._publish_to(queue, change)

    def _publish_to(self, queue: asyncio.Queue[GateChange | None], change: GateChange | None) -> None:
        try:
            queue.put_nowait(change)
        except asyncio.QueueFull:  # a stream that stopped taking changes: end it (it reconnects)
            self._subscribers.discard(queue)
            with contextlib.suppress(asyncio.QueueEmpty):
                queue.get_nowait()
            queue.put_nowait(None)
