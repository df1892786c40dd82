"""Watching a run's inbox for new rows: the executing run's reader is woken by these (baton.runs.inbox).

- **SQLite** (:class:`SqliteInboxWatch`): one watch per database file (and event loop) for every
  run read in the process. When the database's doorbell rings (:mod:`baton.store.doorbell`:
  every inbox row committed on this machine rings it) and on a tick, it reads the inbox ids
  above the last one seen on a private read-only ``sqlite3`` connection in the loop's thread
  (WAL readers never wait on the writer, and an idle run never takes the write lock), and wakes
  the readers of the runs named.
- **Postgres** (:class:`PostgresInboxListen`): a ``LISTEN baton_inbox`` connection of the
  reader's own (``Store.inbox_put`` NOTIFYs the run id at commit), closed whatever ends it; a
  LISTEN that fails or drops (a restart) is tried again, and each one that takes effect wakes
  the reader, which reads then.

This module and :mod:`baton.store.reads` are the store's only users of ``sqlite3`` directly;
both know the schema of :mod:`baton.store.tables`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from pathlib import Path
from typing import Any, ClassVar, Final

from baton.errors import NotFoundError
from baton.store._rundata import INBOX_CHANNEL
from baton.store.doorbell import Doorbell, doorbell_dir
from baton.store.store import Store

__all__ = ["FALLBACK_POLL_SECONDS", "PostgresInboxListen", "SqliteInboxWatch"]

_log = logging.getLogger("baton.store.inbox_watch")

FALLBACK_POLL_SECONDS: Final = 0.5  # a reader woken by a watch (SQLite) or a NOTIFY (Postgres) still reads this often
LISTEN_RETRY_SECONDS: Final = 0.5  # Postgres: a failed or dropped LISTEN is tried again after this, doubling …
LISTEN_RETRY_MAX_SECONDS: Final = 15.0  # … up to this
# libpq settings of the LISTEN connection: named in pg_stat_activity; a dead peer noticed by TCP keepalives.
_LISTEN_CONNECTION: Final = {
    "application_name": "baton-inbox-listen",
    "connect_timeout": 10,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}


class PostgresInboxListen:
    """Postgres: sets ``wake`` when a NOTIFY names the run; ``listening`` while the LISTEN is in effect."""

    def __init__(self, store: Store, run_id: str, wake: asyncio.Event) -> None:
        self._store = store
        self._run_id = run_id
        self._wake = wake
        self.listening = False

    async def run(self) -> None:
        """Postgres: wake the reader when a NOTIFY names this run.

        A failed or dropped LISTEN (a server restart, a terminated backend) is retried after
        ``LISTEN_RETRY_SECONDS``, doubling up to ``LISTEN_RETRY_MAX_SECONDS``; meanwhile the
        reader polls every ``interval``, and each LISTEN that takes effect is followed by a read,
        so a NOTIFY lost in between delays nothing (commands are rows).
        """
        import psycopg  # the postgres extra: present whenever the store is on Postgres

        url = self._store.engine.url.set(drivername="postgresql")
        conninfo = url.render_as_string(hide_password=False)
        pause = LISTEN_RETRY_SECONDS
        while True:
            try:
                await self._listen_once(psycopg, conninfo)
            except (psycopg.Error, OSError) as exc:
                if self.listening:  # it worked until now (a restart, a terminated backend): again soon
                    pause = LISTEN_RETRY_SECONDS
                _log.warning(
                    "LISTEN %s for %s failed (polling; again in %.1f s): %s", INBOX_CHANNEL, self._run_id, pause, exc
                )
            finally:
                self.listening = False
            await asyncio.sleep(pause)
            pause = min(pause * 2, LISTEN_RETRY_MAX_SECONDS)

    async def _listen_once(self, psycopg: Any, conninfo: str) -> None:
        """One LISTEN connection, until it fails (``notifies()`` raises when the connection drops)."""
        connection = await psycopg.AsyncConnection.connect(conninfo, autocommit=True, **_LISTEN_CONNECTION)
        # Owned from here: psycopg builds the connection and returns it with no await between,
        # so a cancel lands before (no connection) or after this line (the finally closes it).
        try:
            await connection.execute(f"LISTEN {INBOX_CHANNEL}")
            self.listening = True
            self._wake.set()  # a command committed before LISTEN took effect (or while it was down): read now
            async for notify in connection.notifies():
                if notify.payload == self._run_id:
                    self._wake.set()
        finally:
            # No await in psycopg's close of a connection outside a pool: nothing can interrupt it.
            # Not ``async with``: its exit first awaits a rollback.
            await connection.close()


class SqliteInboxWatch:
    """SQLite: one watch per database file (and event loop) for every run read in this process.

    Each time the doorbell rings, and on each tick, it reads the inbox ids above the last one
    seen (the primary key: as cheap however long the table grows; SQLite commits writers one at
    a time, so ids grow in commit order) on a private read-only connection in the loop's thread,
    and wakes the readers of their runs. Ticks: every ``FALLBACK_POLL_SECONDS`` with a doorbell
    (a ring lost), every ``interval`` without one.
    """

    _open: ClassVar[dict[tuple[int, str], SqliteInboxWatch]] = {}

    def __init__(self, key: tuple[int, str], connection: sqlite3.Connection, last_id: int, interval: float) -> None:
        self._key = key
        self._connection = connection
        self._last_id = last_id
        self._interval = interval
        self._readers: dict[int, set[asyncio.Event]] = {}
        self._rung = asyncio.Event()
        self._bell = Doorbell.join(doorbell_dir(key[1]), self._rung)
        self._task = asyncio.create_task(self._poll(), name="baton-inbox-watch")

    @classmethod
    async def join(cls, path: str, run_id: str, wake: asyncio.Event, interval: float) -> tuple[SqliteInboxWatch, int]:
        """The watch of ``path`` (started if needed) and the run's key; ``wake`` is set on news."""
        key = (id(asyncio.get_running_loop()), str(Path(path).resolve()))
        opening = asyncio.ensure_future(asyncio.to_thread(_read_only, path))
        try:
            connection: sqlite3.Connection | None = await asyncio.shield(opening)
        except asyncio.CancelledError:  # the thread goes on: its connection is closed when it is there
            opening.add_done_callback(_close_opened)
            raise
        assert connection is not None
        try:
            row = connection.execute("SELECT run_key FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise NotFoundError("run_not_found", f"no run {run_id}")
            watch = cls._open.get(key)
            if watch is None:
                (last_id,) = connection.execute("SELECT COALESCE(MAX(id), 0) FROM inbox").fetchone()
                watch = cls._open[key] = cls(key, connection, int(last_id), interval)
                connection = None  # the watch's now
        finally:
            if connection is not None:
                connection.close()
        run_key = int(row[0])
        watch._interval = min(watch._interval, interval)
        watch._readers.setdefault(run_key, set()).add(wake)
        return watch, run_key

    async def leave(self, run_key: int, wake: asyncio.Event) -> None:
        readers = self._readers.get(run_key, set())
        readers.discard(wake)
        if not readers:
            self._readers.pop(run_key, None)
        if self._readers or self._open.get(self._key) is not self:
            return
        del self._open[self._key]
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        if self._bell is not None:
            self._bell.leave(self._rung)
        self._connection.close()

    def waiting(self, run_key: int) -> bool | None:
        """Whether the run has untaken commands; None when SQLite is busy (ask the store)."""
        query = "SELECT EXISTS(SELECT 1 FROM inbox WHERE run_key = ? AND taken_at IS NULL)"
        try:
            row = self._connection.execute(query, (run_key,)).fetchone()
        except sqlite3.OperationalError:
            return None
        return bool(row[0])

    async def _poll(self) -> None:
        while True:
            interval = self._interval if self._bell is None else max(self._interval, FALLBACK_POLL_SECONDS)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._rung.wait()
            self._rung.clear()  # before the read: a ring during it is seen by the next wait
            try:
                rows = self._connection.execute(
                    "SELECT id, run_key FROM inbox WHERE id > ? ORDER BY id", (self._last_id,)
                ).fetchall()
            except sqlite3.OperationalError:  # busy: the next tick
                continue
            for inbox_id, run_key in rows:
                self._last_id = max(self._last_id, int(inbox_id))
                for wake in self._readers.get(int(run_key), ()):
                    wake.set()


def _close_opened(opening: asyncio.Future[sqlite3.Connection]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()


def _read_only(path: str) -> sqlite3.Connection:
    # Autocommit: each query is its own read transaction and sees every commit before it.
    # The store's schema (baton.store.tables): inbox(id) is the key, inbox(run_key, taken_at) indexed.
    return sqlite3.connect(
        Path(path).resolve().as_uri() + "?mode=ro",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
        timeout=0.05,
    )
