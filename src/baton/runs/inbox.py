"""A run's inbox: commands from any process, taken and acted on by the process executing the run.

Writers (``post_command``: the CLI, the Python API, the HTTP server) insert a row; the executing
process reads it (``InboxReader``) and takes what is new in one ``UPDATE … RETURNING``. On
SQLite one watch per database file reads for every run read in the process when the
database's doorbell rings (:mod:`baton.store.doorbell`: every inbox row committed on this
machine rings it) and every ``FALLBACK_POLL_SECONDS`` (every ``inbox_poll_seconds``, 20 ms by
default, when no doorbell could be made): one indexed read of the ids above the last one seen,
on a private read-only connection in the event loop's thread (WAL readers never wait on the
writer, and an idle run never takes the write lock), and it wakes the readers of the runs named.
On Postgres each reader LISTENs on ``baton_inbox`` (``Store.inbox_put`` NOTIFYs the run id at
commit) on a connection of its own, closed whatever ends the reader; a LISTEN that fails or
drops (a restart) is tried again, and each one that takes effect is followed by a read. Either
way a reader also reads every ``FALLBACK_POLL_SECONDS``, which only matters if a wake-up was
lost. The reader's exit waits for a read in flight and hands on what it took: a command is
handed on or still waits, never taken and dropped.

Each taken command is logged as ``_baton/inbox {id, kind, payload}`` (direction ``baton``)
*before* it is acted on (``RunCommands.handle``); a command the run cannot take is logged as
``_baton/inbox_refused {id, kind, code, message}``.

| kind | payload | what the run does |
|---|---|---|
| ``cancel`` | ``{reason?}`` | as ``RunHandle.cancel()``: the turn is interrupted, the run ends ``cancelled`` |
| ``user_message`` | ``{content}`` | interactive: the next prompt, in inbox order; background: refused |
| ``close`` | ``{}`` | interactive: ends ``finished`` once the turns asked before it are done |
| ``set_permission_mode`` | ``{permission_mode}`` | the Gatekeeper's mode (and ``session/set_mode`` to the agent) |
| ``gate_decision`` | ``{gate_id}`` | from ``GateLedger.decide``: wakes the gate waiting here (baton.runs.parking) |
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Final, Literal

from baton.errors import BatonError, NotFoundError, RefusedError, UsageError
from baton.runs.executors import effective_status
from baton.runs.parking import wake_local
from baton.store import Store
from baton.store._rundata import INBOX_CHANNEL
from baton.store.doorbell import Doorbell, doorbell_dir

__all__ = [
    "COMMAND_KINDS",
    "InboxCommand",
    "InboxReader",
    "RunCommands",
    "post_command",
]

_log = logging.getLogger("baton.runs.inbox")

COMMAND_KINDS: Final = ("cancel", "user_message", "close", "set_permission_mode")
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

Note = Callable[[str, Any], object]


@dataclass(frozen=True)
class InboxCommand:
    id: int
    kind: str
    payload: dict[str, Any]


async def post_command(store: Store, run_id: str, kind: str, payload: dict[str, Any]) -> int:
    """Queue ``kind`` for the run; its inbox id. Refused before anything is written:

    ``run_not_found``; ``run_not_running`` for a run that has ended, and for a message or a
    close to a run nobody executes (its executor is gone: nothing would act on it);
    ``run_not_interactive`` for a message or a close to a background run; ``run_paused`` for a
    message while a gate is pending. ``cancel`` and
    ``set_permission_mode`` are recorded for a run nobody executes: a resume acts on them.
    """
    if kind not in COMMAND_KINDS:
        raise UsageError("invalid_argument", f"unknown command {kind!r}; known: {', '.join(COMMAND_KINDS)}")
    record = await store.get_run(run_id)
    if record.is_terminal:
        raise RefusedError("run_not_running", f"run {run_id} has ended ({record.status})")
    status = effective_status(record.status, record.executor_id, record.heartbeat_at)
    if kind in ("user_message", "close") and record.run_mode != "interactive":
        raise RefusedError("run_not_interactive", f"run {run_id} is a {record.run_mode} run: it takes no {kind}")
    if kind in ("user_message", "close") and status == "interrupted":
        raise RefusedError("run_not_running", f"no process executes run {run_id} (resume it first)")
    if kind == "user_message" and status == "paused":
        raise RefusedError("run_paused", f"run {run_id} waits for a gate decision; decide it first")
    return await store.inbox_put(run_id, kind, payload)


class InboxReader:
    """Polls the run's inbox and hands each command, in order, to ``on_command``.

    An async context manager: the polling task lives between enter and exit.
    """

    def __init__(
        self,
        store: Store,
        run_id: str,
        *,
        taken_by: str,
        interval: float,
        on_command: Callable[[InboxCommand], Awaitable[None]],
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._taken_by = taken_by
        self._interval = interval
        self._on_command = on_command
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        self._listening = False
        self._watch: _SqliteWatch | None = None
        self._run_key = 0

    async def __aenter__(self) -> InboxReader:
        if self._tasks:
            raise RuntimeError("an InboxReader is entered once")
        url = self._store.engine.url
        if url.get_backend_name() == "sqlite" and url.database:
            self._watch, self._run_key = await _SqliteWatch.join(url.database, self._run_id, self._wake, self._interval)
        self._tasks.append(asyncio.create_task(self._poll(), name=f"baton-inbox-{self._run_id}"))
        if self._store.engine.dialect.name == "postgresql":
            self._tasks.append(asyncio.create_task(self._listen(), name=f"baton-inbox-listen-{self._run_id}"))
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._watch is not None:
            await self._watch.leave(self._run_key, self._wake)

    async def take(self) -> list[InboxCommand]:
        """What waits in the inbox, taken by this reader (a read first: nothing waits, no write)."""
        waiting = self._watch.waiting(self._run_key) if self._watch is not None else None
        if waiting is None:  # Postgres, or SQLite was busy: through the store
            waiting = bool(await self._store.inbox_pending(self._run_id))
        if not waiting:
            return []
        rows = await self._store.inbox_take(self._run_id, self._taken_by)
        return [InboxCommand(int(row["id"]), str(row["kind"]), dict(row["payload"] or {})) for row in rows]

    async def _poll(self) -> None:
        while True:
            self._wake.clear()  # before the read: a NOTIFY during it wakes the next wait
            await self._read()
            woken = self._listening or self._watch is not None
            interval = max(self._interval, FALLBACK_POLL_SECONDS) if woken else self._interval
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._wake.wait()

    async def _read(self) -> None:
        """One ``take()``, its commands handed on; a cancel (the reader's exit) waits for the read.

        The store works in a worker thread that a cancel cannot stop: abandoned, a take would
        mark commands taken that nobody acts on, and the thread could hand its connection back
        after the store closed. So the read finishes, what it took is handed on, then the
        cancel goes on.
        """
        reading = asyncio.ensure_future(self.take())
        cancelled: asyncio.CancelledError | None = None
        while not reading.done():
            try:
                await asyncio.shield(reading)
            except asyncio.CancelledError as exc:
                cancelled = exc
            except Exception:
                break  # reading.exception() below
        if reading.cancelled():  # cancelled itself (a loop shutting down cancels every task)
            raise cancelled or asyncio.CancelledError()
        if reading.exception() is not None:  # a busy or unreachable store: try again next tick
            _log.warning("reading the inbox of %s failed: %s", self._run_id, reading.exception())
        else:
            for command in reading.result():
                await self._on_command(command)
        if cancelled is not None:
            raise cancelled

    async def _listen(self) -> None:
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
                if self._listening:  # it worked until now (a restart, a terminated backend): again soon
                    pause = LISTEN_RETRY_SECONDS
                _log.warning(
                    "LISTEN %s for %s failed (polling; again in %.1f s): %s", INBOX_CHANNEL, self._run_id, pause, exc
                )
            finally:
                self._listening = False
            await asyncio.sleep(pause)
            pause = min(pause * 2, LISTEN_RETRY_MAX_SECONDS)

    async def _listen_once(self, psycopg: Any, conninfo: str) -> None:
        """One LISTEN connection, until it fails (``notifies()`` raises when the connection drops)."""
        connection = await psycopg.AsyncConnection.connect(conninfo, autocommit=True, **_LISTEN_CONNECTION)
        # Owned from here: psycopg builds the connection and returns it with no await between,
        # so a cancel lands before (no connection) or after this line (the finally closes it).
        try:
            await connection.execute(f"LISTEN {INBOX_CHANNEL}")
            self._listening = True
            self._wake.set()  # a command committed before LISTEN took effect (or while it was down): read now
            async for notify in connection.notifies():
                if notify.payload == self._run_id:
                    self._wake.set()
        finally:
            # No await in psycopg's close of a connection outside a pool: nothing can interrupt it.
            # Not ``async with``: its exit first awaits a rollback.
            await connection.close()


class _SqliteWatch:
    """SQLite: one watch per database file (and event loop) for every run read in this process.

    Each time the doorbell rings, and on each tick, it reads the inbox ids above the last one
    seen (the primary key: as cheap however long the table grows; SQLite commits writers one at
    a time, so ids grow in commit order) on a private read-only connection in the loop's thread,
    and wakes the readers of their runs. Ticks: every ``FALLBACK_POLL_SECONDS`` with a doorbell
    (a ring lost), every ``interval`` without one.
    """

    _open: ClassVar[dict[tuple[int, str], _SqliteWatch]] = {}

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
    async def join(cls, path: str, run_id: str, wake: asyncio.Event, interval: float) -> tuple[_SqliteWatch, int]:
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


class RunCommands:
    """What the inbox asked of one run.

    ``cancel`` and ``set_permission_mode`` act at once; messages and ``close`` of an
    interactive run wait, in order, for the turn in progress to end (``next_prompt``).
    """

    def __init__(
        self,
        *,
        run_mode: Literal["background", "interactive"],
        note: Note,
        cancel: Callable[[], None],
        set_mode: Callable[[str], Awaitable[None]],
    ) -> None:
        self.run_mode = run_mode
        self._note = note
        self._cancel = cancel
        self._set_mode = set_mode
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()  # None: close
        self._closing = False
        self._ended = False

    def end(self) -> None:
        """No turn follows: a message, a close or a cancel handed on from now (by the reader's exit,
        a read in flight when the turns ended) is refused, and a finished run stays finished."""
        self._ended = True

    async def handle(self, command: InboxCommand) -> None:
        self._note("inbox", {"id": command.id, "kind": command.kind, "payload": command.payload})
        try:
            await self._act(command)
        except BatonError as exc:
            self._refused(command, exc.code, exc.message)
        except Exception as exc:  # the agent failed to take it (session/set_mode): the run goes on
            self._refused(command, "agent_error", str(exc) or type(exc).__name__)

    def _refused(self, command: InboxCommand, code: str, message: str) -> None:
        self._note("inbox_refused", {"id": command.id, "kind": command.kind, "code": code, "message": message})

    async def _act(self, command: InboxCommand) -> None:
        kind, payload = command.kind, command.payload
        if kind in ("cancel", "user_message", "close") and self._ended:
            raise RefusedError("run_not_running", "the run has ended: no turn takes it")
        if kind == "cancel":
            self._cancel()
            self._queue.put_nowait(None)  # wakes an interactive run waiting for a message
        elif kind == "set_permission_mode":
            mode = payload.get("permission_mode")
            if not isinstance(mode, str):
                raise UsageError("invalid_argument", "set_permission_mode needs a permission_mode string")
            await self._set_mode(mode)
        elif kind == "gate_decision":
            gate_id = payload.get("gate_id")
            if not isinstance(gate_id, str) or not gate_id:
                raise UsageError("invalid_argument", "gate_decision needs a gate_id string")
            wake_local(gate_id)  # the waiter reads the decision from the ledger, whatever this says
        elif kind in ("user_message", "close"):
            if self.run_mode != "interactive":
                raise RefusedError(
                    "run_not_interactive",
                    f"a {self.run_mode} run takes no {kind}: it ends when the agent ends its turn "
                    "(start it with --interactive)",
                )
            if self._closing:
                raise RefusedError("run_not_running", "the run is closing")
            if kind == "close":
                self._closing = True
                self._queue.put_nowait(None)
                return
            content = payload.get("content")
            if not isinstance(content, str) or not content:
                raise UsageError("invalid_argument", "user_message needs a non-empty content string")
            self._queue.put_nowait(content)
        else:
            raise UsageError("invalid_argument", f"unknown command {kind!r}")

    async def next_prompt(self, idle_seconds: float) -> str | None:
        """The next message of an interactive run, or None: closed, cancelled, or idle too long."""
        try:
            async with asyncio.timeout(idle_seconds):
                prompt = await self._queue.get()
        except TimeoutError:
            self._note("closed", {"reason": "idle_timeout", "idle_seconds": idle_seconds})
            return None
        if prompt is None and self._closing:
            self._note("closed", {"reason": "close"})
        return prompt
