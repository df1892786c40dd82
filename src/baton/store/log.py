"""The session log: every message of a run, numbered, redacted, committed in groups.

``append`` is synchronous: it redacts the payload, assigns the run's next ``seq`` (1, 2, 3 …
with no gaps), stamps ``ts`` and queues the entry; it never waits for the disk. One writer
thread commits queued entries in groups (at most one commit per ``commit_interval``, at
most ``max_batch`` rows each). Subscribers, ``read`` and ``wait_committed`` see an entry only
once it is committed, so the crash window is the entries of the last few milliseconds,
which nobody has seen.

Backpressure: ``append`` never drops or refuses an entry, and never blocks. Once more than
``max_pending`` entries wait for the disk, ``await log.drain()`` (a comparison when there is
no backlog) blocks the producer until half of them are committed. Every producer that can
await calls it after appending (the transport, after each message it received: a stalled disk
then stops the reading of the agent's output, and the agent blocks on its pipe). Memory is
then bounded by ``max_pending`` entries (their row and redacted payload: ~20 MB at the default
20,000 and 300-byte payloads) plus one entry per producer that does not await.

A failed write (after a few retries of a busy or locked database) is never swallowed: the
writer stops, and ``append``, ``flush``, ``wait_committed``, subscribers and ``aclose``
raise :class:`LogWriteError`. Entries appended since the last commit are then not durable.

All methods must be called from the event loop the log was entered in. Entries handed to
subscribers are shared between them: do not mutate them, nor a payload after appending it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Final, Literal

from baton.errors import StorageError
from baton.events.entry import Direction, LogEntry, utc_timestamp
from baton.store._runlog import RunLog, Subscriber, Waiters
from baton.store._writer import (
    LogWriter,
    Queued,
    StoredEntries,
    last_params,
    read_entries,
    read_stored,
    run_position,
)
from baton.store.committed import CommittedEntries
from baton.store.records import chunk_text
from baton.store.redact import Redactor
from baton.store.storage_errors import in_thread
from baton.store.store import Store

__all__ = ["LogWriteError", "SessionLog"]

_PAGE: Final = 1000
_log = logging.getLogger(__name__)


class LogWriteError(StorageError):
    """The session log could not be committed (``log_write_failed``); entries since the last
    commit are not durable."""

    def __init__(self, message: str) -> None:
        super().__init__("log_write_failed", message)


class SessionLog:
    """The runs' logs of one process; an async context manager (``aclose`` flushes)."""

    def __init__(
        self,
        store: Store,
        redactor: Redactor,
        *,
        commit_interval: float = 0.005,
        max_batch: int = 5000,
        max_pending: int = 20_000,
    ) -> None:
        if commit_interval < 0 or max_batch < 1 or max_pending < 1:
            raise ValueError("commit_interval must be >= 0, max_batch and max_pending >= 1")
        self._store = store
        self._redactor = redactor
        self._commit_interval = commit_interval
        self._max_batch = max_batch
        self._max_pending = max_pending
        self._state: Literal["new", "open", "closed"] = "new"
        self._queue: deque[Queued] = deque()
        self._runs: dict[str, RunLog] = {}
        self._queued_total = 0
        self._committed_total = 0
        self._totals = Waiters()
        self._failure: BaseException | None = None
        self._writer: LogWriter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ts_ms, self._ts = -1, ""
        self._redact_json = redactor.redact_json
        self._wake = threading.Event()  # the writer's, once it exists
        self._on_commit: Callable[[CommittedEntries], None] | None = None

    async def __aenter__(self) -> SessionLog:
        if self._state != "new":
            raise RuntimeError("a SessionLog cannot be reopened")
        self._loop = asyncio.get_running_loop()
        self._writer = LogWriter(
            self._store.engine,
            self._queue,
            commit_interval=self._commit_interval,
            max_batch=self._max_batch,
            on_commit=self._from_writer_commit,
            on_failure=self._from_writer_failure,
        )
        self._wake = self._writer.wake
        self._writer.start()
        self._state = "open"
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Commit everything queued, stop the writer and end every subscriber."""
        if self._state == "closed":
            return
        self._state = "closed"
        if self._writer is not None:
            self._writer.stop()
            await asyncio.to_thread(self._writer.join)
        # The writer's last callbacks were queued on the loop before the join returned.
        await asyncio.sleep(0)
        for run in self._runs.values():
            run.closed = True
            run.wake_subscribers()
        self._raise_failure()

    def observe_commits(self, callback: Callable[[CommittedEntries], None] | None) -> None:
        """Call ``callback`` on the event loop with each group of committed entries (the OTEL
        export, baton.observability); it must return quickly and never raise. None: no one."""
        self._on_commit = callback

    def open_run(self, run_id: str) -> None:
        """Start (or continue) ``run_id``'s log after its last committed seq."""
        self._require_open()
        run = self._runs.get(run_id)
        if run is not None and not run.closed:
            return
        run_key, last = run_position(self._store.engine, run_id)  # one indexed read
        if run is None:
            self._runs[run_id] = RunLog(run_id, run_key, next_seq=last + 1, committed=last)
        else:
            run.closed = run.lost = False  # a new execution here: it is fenced again if it must be
            run.next_seq = max(run.next_seq, last + 1)

    def fence(self, run_id: str, executor_id: str) -> None:
        """The open run's entries commit only while ``executor_id`` is its executor or it has
        none (Postgres: checked in each commit's transaction, the run's row share-locked, so a
        takeover's claim and this commit are ordered); once another executor has it, its
        entries are dropped and the run is lost here (docs/fleet.md "Fencing")."""
        run = self._runs.get(run_id)
        if run is None or run.closed:
            raise RuntimeError(f"run {run_id} is not open in this session log")
        run.executor, run.lost = executor_id, False

    def lose(self, run_id: str) -> None:
        """This process no longer executes the run: its queued entries and every later append
        are dropped (a lost fleet run, baton.runs.lock_watch)."""
        run = self._runs.get(run_id)
        if run is not None:
            run.lost = True

    def lost(self, run_id: str) -> bool:
        run = self._runs.get(run_id)
        return run is not None and run.lost

    def append(self, run_id: str, direction: Direction, method: str | None, payload: dict[str, Any]) -> int:
        """Redact, number and queue one entry; returns its seq (a lost run's: the last one, nothing queued)."""
        # The hot path of every run: each line here is measured (bench/append.py).
        if self._failure is not None:
            self._raise_failure()
        run = self._runs.get(run_id)
        if run is None or run.closed or self._state != "open":
            self._require_open()
            raise RuntimeError(f"run {run_id} is not open in this session log")
        if run.lost:
            return run.next_seq - 1
        text, redacted = self._redact_json(payload)
        seq = run.next_seq
        run.next_seq = seq + 1
        now_ms = time.time_ns() // 1_000_000
        ts = self._ts if now_ms == self._ts_ms else self._new_timestamp(now_ms)
        chunk = chunk_text(method, redacted) if method == "session/update" else None
        self._queue.append(((run.run_key, seq, ts, direction, method, text, chunk), run, redacted))
        self._queued_total += 1
        if not self._wake.is_set():
            self._wake.set()
        return seq

    def close_run(self, run_id: str) -> None:
        """No more appends to ``run_id``; its subscribers end after its last entry."""
        run = self._runs.get(run_id)
        if run is not None and not run.closed:
            run.closed = True
            run.wake_subscribers()

    async def wait_committed(self, run_id: str, seq: int) -> None:
        """Return once entry ``seq`` of ``run_id`` is committed."""
        run = self._runs.get(run_id)
        if run is None:
            raise RuntimeError(f"run {run_id} is not open in this session log")
        if seq <= run.committed:
            return
        self._raise_failure()
        if seq >= run.next_seq:
            raise ValueError(f"entry {seq} of {run_id} was never appended")
        await run.waiters.wait(seq)

    async def flush(self) -> None:
        """Return once everything appended so far is committed."""
        self._raise_failure()
        if self._committed_total < self._queued_total:
            await self._totals.wait(self._queued_total)

    @property
    def pending(self) -> int:
        """Entries appended and not yet committed."""
        return self._queued_total - self._committed_total

    async def drain(self) -> None:
        """Wait, when more than ``max_pending`` entries are queued, until half are committed."""
        self._raise_failure()
        if self._queued_total - self._committed_total > self._max_pending:
            await self._totals.wait(self._queued_total - self._max_pending // 2)

    async def read(self, run_id: str, after: int = 0, until: int | None = None) -> list[LogEntry]:
        """Committed entries with ``after < seq <= until``."""
        run_key = await self._run_key(run_id)
        return await in_thread(read_entries, self._store.engine, run_id, run_key, after, until)

    async def last_params(self, run_id: str, method: str) -> dict[str, Any] | None:
        """The ``params`` of the run's latest committed entry with ``method`` (None: there is
        none), one row read: the log's other payloads are never decoded."""
        run_key = await self._run_key(run_id)
        return await in_thread(last_params, self._store.engine, run_key, method)

    async def read_lazily(
        self, run_id: str, after: int = 0, until: int | None = None, *, chunks_as_text: bool = False
    ) -> StoredEntries:
        """The entries :meth:`read` returns, each payload decoded only as the result is iterated.

        For a fold over a long log that keeps little of each entry (the conversation): the
        decoded entries then die one by one instead of a page at a time. ``chunks_as_text``:
        an agent_message_chunk's payload is only what the conversation reads of it (its
        ``sessionUpdate`` and ``content.text``, from the ``chunk_text`` column, no decoding).
        """
        run_key = await self._run_key(run_id)
        return await in_thread(
            read_stored, self._store.engine, run_id, run_key, after, until, chunks_as_text=chunks_as_text
        )

    async def subscribe(self, run_id: str, after: int = 0) -> AsyncGenerator[LogEntry, None]:
        """Committed entries with ``seq > after``: the stored ones, then live ones as they commit.

        Ends once the run's log is closed and its last entry delivered. A run this log does
        not hold (never opened here) is replayed from the store and the iterator ends.
        """
        run = self._runs.get(run_id)
        cursor = after
        if run is None:
            run_key = await self._run_key(run_id)
            while page := await self._page(run_id, run_key, cursor):
                for entry in page:
                    yield entry
                cursor = page[-1]["seq"]
            return
        subscriber = Subscriber()
        run.subscribers.add(subscriber)  # before reading the store: no commit falls in between
        try:
            replay = True
            while True:
                self._raise_failure()
                if replay or subscriber.overflowed:
                    subscriber.overflowed = False
                    replay = False
                    while page := await self._page(run_id, run.run_key, cursor):
                        for entry in page:
                            yield entry
                        cursor = page[-1]["seq"]
                while subscriber.entries and not subscriber.overflowed:
                    entry = subscriber.entries.popleft()
                    if entry["seq"] <= cursor:
                        continue  # already replayed from the store
                    if entry["seq"] > cursor + 1:
                        replay = True
                        break
                    yield entry
                    cursor = entry["seq"]
                if replay or subscriber.overflowed or subscriber.entries:
                    continue
                if run.closed and cursor >= run.next_seq - 1:
                    return
                subscriber.wake.clear()
                await subscriber.wake.wait()
        finally:
            run.subscribers.discard(subscriber)

    async def _page(self, run_id: str, run_key: int, after: int) -> list[LogEntry]:
        return await in_thread(read_entries, self._store.engine, run_id, run_key, after, None, _PAGE)

    async def _run_key(self, run_id: str) -> int:
        run = self._runs.get(run_id)
        if run is not None:
            return run.run_key
        run_key, _last = await in_thread(run_position, self._store.engine, run_id)
        return run_key

    def _new_timestamp(self, now_ms: int) -> str:
        # utc_timestamp() costs a fifth of an append; it only changes once a millisecond.
        moment = datetime.fromtimestamp(now_ms // 1000, UTC).replace(microsecond=now_ms % 1000 * 1000)
        self._ts_ms, self._ts = now_ms, utc_timestamp(moment)
        return self._ts

    def _require_open(self) -> None:
        if self._state != "open":
            raise RuntimeError(f"the session log is {self._state}, not open")

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise LogWriteError(f"the session log could not be committed: {self._failure}") from self._failure

    # Called on the writer thread.
    def _from_writer_commit(self, batch: list[Queued], dropped: list[Queued]) -> None:
        self._call_on_loop(self._committed, batch, dropped)

    def _from_writer_failure(self, exc: BaseException) -> None:
        self._failure = exc
        self._call_on_loop(self._failed)

    def _call_on_loop(self, callback: Any, *args: Any) -> None:
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is left to tell
            self._loop.call_soon_threadsafe(callback, *args)

    # Called on the event loop.
    def _committed(self, batch: list[Queued], dropped: list[Queued]) -> None:
        touched: dict[str, RunLog] = {}
        for row, run, payload in batch:
            seq = row[1]
            run.committed = seq
            touched[run.run_id] = run
            if run.subscribers:  # entries are built only for someone to see them
                entry: LogEntry = {
                    "run_id": run.run_id,
                    "seq": seq,
                    "ts": row[2],
                    "direction": row[3],
                    "method": row[4],
                    "payload": payload,
                }
                for subscriber in run.subscribers:
                    subscriber.push(entry)
        for row, run, _payload in dropped:  # a lost run's: settled, never seen
            run.committed = max(run.committed, row[1])
            touched[run.run_id] = run
        self._committed_total += len(batch) + len(dropped)
        for run in touched.values():
            run.waiters.advance(run.committed)
            run.wake_subscribers()
        self._totals.advance(self._committed_total)
        observer = self._on_commit
        if observer is not None and batch:
            try:
                observer(CommittedEntries(batch, {run.run_key: run.run_id for run in touched.values()}))
            except Exception:  # telemetry never costs the log
                _log.exception("the commit observer failed")

    def _failed(self) -> None:
        def error() -> LogWriteError:
            return LogWriteError(f"the session log could not be committed: {self._failure}")

        self._totals.fail(error)
        for run in self._runs.values():
            run.waiters.fail(error)
            run.wake_subscribers()
