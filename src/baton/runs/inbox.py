"""A run's inbox: commands from any process, taken and acted on by the process executing the run.

Writers (``post_command``: the CLI, the Python API, the HTTP server) insert a row; the executing
process reads it (``InboxReader``) and takes what is new in one ``UPDATE … RETURNING``. It is
woken by the store's watches (:mod:`baton.store.inbox_watch`): on SQLite one watch per
database file reads for every run read in the process when the
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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Literal

from baton.errors import BatonError, RefusedError, UsageError
from baton.runs.executors import effective_status
from baton.runs.parking import wake_local
from baton.store import Store
from baton.store.inbox_watch import FALLBACK_POLL_SECONDS, PostgresInboxListen, SqliteInboxWatch

__all__ = [
    "COMMAND_KINDS",
    "InboxCommand",
    "InboxReader",
    "RunCommands",
    "post_command",
]

_log = logging.getLogger("baton.runs.inbox")

COMMAND_KINDS: Final = ("cancel", "user_message", "close", "set_permission_mode")
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
        self._watch: SqliteInboxWatch | None = None
        self._listen: PostgresInboxListen | None = None
        self._run_key = 0

    async def __aenter__(self) -> InboxReader:
        if self._tasks:
            raise RuntimeError("an InboxReader is entered once")
        url = self._store.engine.url
        if url.get_backend_name() == "sqlite" and url.database:
            self._watch, self._run_key = await SqliteInboxWatch.join(
                url.database, self._run_id, self._wake, self._interval
            )
        self._tasks.append(asyncio.create_task(self._poll(), name=f"baton-inbox-{self._run_id}"))
        if self._store.engine.dialect.name == "postgresql":
            self._listen = PostgresInboxListen(self._store, self._run_id, self._wake)
            self._tasks.append(asyncio.create_task(self._listen.run(), name=f"baton-inbox-listen-{self._run_id}"))
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
            woken = (self._listen is not None and self._listen.listening) or self._watch is not None
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
