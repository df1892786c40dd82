"""Waiting for inbox commands without polling: a wake-up whenever an inbox row is committed.

Whoever waits for something another process records through the inbox — a gate decision (the
ledger writes a ``gate_decision`` command with it), a message, a cancel — subscribes with
:func:`inbox_wakeups` and waits on its event, reading the rows when it is set and on a slow
tick otherwise (a wake-up only shortens the wait; the rows are the truth):

- **SQLite**: the database's doorbell (:mod:`baton.store.doorbell`): any inbox row committed by
  any process on this machine wakes every subscriber of this process.
- **Postgres**: one ``LISTEN baton_inbox`` connection per event loop and database
  (``application_name=baton-wakeups``), shared by the subscribers; a ``NOTIFY`` wakes those of
  its run (and those of every run). A failed or dropped ``LISTEN`` is tried again after 0.5 s,
  doubling up to 15 s; each one that takes effect wakes every subscriber (what was committed
  while it was down is read then). Meanwhile :attr:`Wakeup.live` is False: callers poll at
  their short interval.

The executing run's own :class:`~baton.runs.inbox.InboxReader` has its Postgres ``LISTEN`` of
its own (docs/runs.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar, Final

from baton.store._rundata import INBOX_CHANNEL
from baton.store.doorbell import Doorbell, doorbell_dir
from baton.store.store import Store

__all__ = ["Wakeup", "inbox_wakeups"]

_log = logging.getLogger("baton.store.wakeups")

LISTEN_RETRY_SECONDS: Final = 0.5
LISTEN_RETRY_MAX_SECONDS: Final = 15.0
_LISTEN_CONNECTION: Final = {
    "application_name": "baton-wakeups",
    "connect_timeout": 10,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}


class Wakeup:
    """A subscription: ``event`` is set on a wake-up (clear it before reading the rows)."""

    def __init__(self, source: _Doorbell | _Listen | None) -> None:
        self.event = asyncio.Event()
        self._source = source

    @property
    def live(self) -> bool:
        """Whether a wake-up can arrive now (False: no doorbell, or the ``LISTEN`` is down)."""
        return self._source is not None and self._source.live


@contextlib.asynccontextmanager
async def inbox_wakeups(store: Store, run_id: str | None = None) -> AsyncIterator[Wakeup]:
    """Wake-ups for inbox rows of ``run_id`` (None: of any run) while the block runs."""
    url = store.engine.url
    if url.get_backend_name() == "sqlite" and url.database:
        bell = _Doorbell(doorbell_dir(url.database))
        wakeup = Wakeup(bell)
        bell.join(wakeup.event)
        try:
            yield wakeup
        finally:
            bell.leave(wakeup.event)
        return
    if url.get_backend_name() != "postgresql":
        yield Wakeup(None)
        return
    listen = _Listen.of(url.set(drivername="postgresql").render_as_string(hide_password=False))
    wakeup = Wakeup(listen)
    listen.join(wakeup.event, run_id)
    try:
        yield wakeup
    finally:
        await listen.leave(wakeup.event)


class _Doorbell:
    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._bell: Doorbell | None = None

    @property
    def live(self) -> bool:
        return self._bell is not None

    def join(self, event: asyncio.Event) -> None:
        self._bell = Doorbell.join(self._directory, event)

    def leave(self, event: asyncio.Event) -> None:
        if self._bell is not None:
            self._bell.leave(event)


class _Listen:
    """One ``LISTEN`` connection per (event loop, database), while it has subscribers."""

    _open: ClassVar[dict[tuple[int, str], _Listen]] = {}

    def __init__(self, key: tuple[int, str], conninfo: str) -> None:
        self._key = key
        self._conninfo = conninfo
        self._events: dict[asyncio.Event, str | None] = {}
        self.live = False
        self._task = asyncio.create_task(self._listen(), name="baton-wakeups-listen")

    @classmethod
    def of(cls, conninfo: str) -> _Listen:
        key = (id(asyncio.get_running_loop()), conninfo)
        found = cls._open.get(key)
        if found is None:
            found = cls._open[key] = cls(key, conninfo)
        return found

    def join(self, event: asyncio.Event, run_id: str | None) -> None:
        self._events[event] = run_id

    async def leave(self, event: asyncio.Event) -> None:
        self._events.pop(event, None)
        if self._events or self._open.get(self._key) is not self:
            return
        del self._open[self._key]
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _listen(self) -> None:
        import psycopg  # the postgres extra: present whenever the store is on Postgres

        pause = LISTEN_RETRY_SECONDS
        while True:
            try:
                await self._listen_once(psycopg)
            except (psycopg.Error, OSError) as exc:
                if self.live:
                    pause = LISTEN_RETRY_SECONDS
                _log.warning("LISTEN %s failed (polling; again in %.1f s): %s", INBOX_CHANNEL, pause, exc)
            finally:
                self.live = False
            await asyncio.sleep(pause)
            pause = min(pause * 2, LISTEN_RETRY_MAX_SECONDS)

    async def _listen_once(self, psycopg: Any) -> None:
        connection = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True, **_LISTEN_CONNECTION)
        # Owned from here (psycopg returns it with no await after building it): the finally closes it.
        try:
            await connection.execute(f"LISTEN {INBOX_CHANNEL}")
            self.live = True
            for event in self._events:  # what was committed before the LISTEN took effect: read now
                event.set()
            async for notify in connection.notifies():
                for event, run_id in tuple(self._events.items()):
                    if run_id is None or run_id == notify.payload:
                        event.set()
        finally:
            await connection.close()
