"""The session log's SQL: the group-commit writer thread and the reads.

One thread with one connection commits every queued row in groups, idempotently (a retried
group changes nothing: ``UNIQUE(run_key, seq)`` with ``ON CONFLICT DO NOTHING``):

- SQLite: ``BEGIN IMMEDIATE``, multi-row ``INSERT … VALUES (…), (…)`` with a few fixed-size
  templates (``executemany`` releases the GIL per row and collapses next to a busy thread).
- Postgres: ``COPY`` into a temporary table (psycopg 3, rows formatted in C), then
  ``INSERT INTO log_entries SELECT … ON CONFLICT DO NOTHING``; the temporary table empties
  itself at each commit.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from typing import Any, Final, Protocol, cast

from sqlalchemy import Engine, func, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from baton.acp.wire import decode_json
from baton.errors import NotFoundError
from baton.events.entry import Direction, LogEntry
from baton.store._runlog import RunLog
from baton.store.committed import Row
from baton.store.engine import READ_ONLY
from baton.store.tables import log_entries, runs

__all__ = [
    "LogWriter",
    "Queued",
    "Row",
    "StoredEntries",
    "StoredRow",
    "last_params",
    "read_entries",
    "read_stored",
    "run_position",
]

# (seq, ts, direction, method, payload JSON text or None, chunk text): a committed entry as read,
# payload not decoded (None: an agent chunk read for the conversation, its text is enough).
StoredRow = tuple[int, str, str, str | None, str | None, str | None]
# The row, its run, and the redacted payload subscribers see once it is committed.
Queued = tuple[Row, RunLog, dict[str, Any]]

_TEMPLATE_SIZES: Final = (1000, 100, 10, 1)  # 7 columns x 1000 rows < SQLite's 32766 variables
_RETRY_DELAYS: Final = (0.05, 0.25, 1.0)
_COLUMNS: Final = "run_key, seq, ts, direction, method, payload, chunk_text"
_INCOMING: Final = "baton_log_incoming"
_COPY_TYPES: Final = ["int4", "int4", "text", "text", "text", "text", "text"]


class _Inserter(Protocol):
    def __call__(self, connection: Connection, rows: list[Row], *, retry: bool) -> None: ...


class _MultiRowInsert:
    """``INSERT … VALUES … ON CONFLICT DO NOTHING`` with 1000/100/10/1-row templates (SQLite)."""

    def __init__(self, engine: Engine) -> None:
        mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
        row = "(" + ",".join([mark] * 7) + ")"
        head = f"INSERT INTO log_entries ({_COLUMNS}) VALUES "
        self._templates = {size: head + ",".join([row] * size) + " ON CONFLICT DO NOTHING" for size in _TEMPLATE_SIZES}

    def __call__(self, connection: Connection, rows: list[Row], *, retry: bool) -> None:
        cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            start = 0
            for size in _TEMPLATE_SIZES:
                template = self._templates[size]
                while len(rows) - start >= size:
                    cursor.execute(template, tuple(chain.from_iterable(rows[start : start + size])))
                    start += size
        finally:
            cursor.close()


class _CopyInsert:
    """``COPY`` straight into ``log_entries`` (Postgres); a retry goes through a temporary table.

    ``COPY`` cannot skip conflicting rows, so when a group may have been committed already (a
    retry after an error whose outcome is unknown, or a duplicate key) its rows are copied into
    a temporary table and moved with ``INSERT … SELECT … ON CONFLICT DO NOTHING``; the direct
    path is 20–50 % faster (measured here) and is what every other group takes.
    """

    def __call__(self, connection: Connection, rows: list[Row], *, retry: bool) -> None:
        driver = connection.connection.driver_connection
        with driver.cursor() as cursor:  # type: ignore[union-attr]
            if not retry:
                self._copy(cursor, "log_entries", rows)
                return
            # Rare: no need to remember which connection has the table already.
            cursor.execute(
                f"CREATE TEMPORARY TABLE IF NOT EXISTS {_INCOMING}"
                " (LIKE log_entries INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
            )
            self._copy(cursor, _INCOMING, rows)
            cursor.execute(
                f"INSERT INTO log_entries ({_COLUMNS}) SELECT {_COLUMNS} FROM {_INCOMING} ON CONFLICT DO NOTHING"
            )

    @staticmethod
    def _copy(cursor: Any, table: str, rows: list[Row]) -> None:
        # Binary: ~40 % less client CPU a row than text (measured here), and rows are
        # formatted in C; the types are those of log_entries (INTEGER is int4).
        with cursor.copy(f"COPY {table} ({_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(_COPY_TYPES)
            write_row = copy.write_row
            for row in rows:
                write_row(row)


def _inserter(engine: Engine) -> _Inserter:
    if engine.dialect.name == "postgresql":
        return _CopyInsert()
    return _MultiRowInsert(engine)


def _driver_errors(engine: Engine) -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(errors worth another try, duplicate-key errors), as the driver's cursor raises them."""
    dbapi = engine.dialect.loaded_dbapi
    retryable: tuple[type[BaseException], ...] = (OperationalError, dbapi.OperationalError)
    if engine.dialect.name == "postgresql":
        from psycopg import errors

        return retryable, (errors.UniqueViolation,)
    return retryable, ()


class LogWriter(threading.Thread):
    """Drains ``queue`` into the database, at most one commit per ``commit_interval``."""

    def __init__(
        self,
        engine: Engine,
        queue: deque[Queued],
        *,
        commit_interval: float,
        max_batch: int,
        on_commit: Callable[[list[Queued], list[Queued]], None],
        on_failure: Callable[[BaseException], None],
    ) -> None:
        super().__init__(name="baton-log-writer", daemon=True)
        self._engine = engine
        self._queue = queue
        self._interval = commit_interval
        self._max_batch = max_batch
        self._on_commit = on_commit
        self._on_failure = on_failure
        self._insert = _inserter(engine)
        self._fences = engine.dialect.name == "postgresql"  # SQLite serves one machine: nothing to fence
        self._retryable, self._duplicate = _driver_errors(engine)
        self.wake = threading.Event()
        self._stopping = False

    def stop(self) -> None:
        """Ask the thread to commit what is queued and end."""
        self._stopping = True
        self.wake.set()

    def run(self) -> None:
        try:
            with self._engine.connect() as connection:
                self._loop(connection)
        except BaseException as exc:
            self._on_failure(exc)

    def _loop(self, connection: Connection) -> None:
        # Commits start at most once per interval; a commit that took longer (an fsync on
        # Postgres) is followed at once by the next, whose group filled meanwhile.
        last_start = 0.0
        queue, max_batch = self._queue, self._max_batch
        while True:
            self.wake.wait()
            delay = last_start + self._interval - time.monotonic()
            if delay > 0 and not self._stopping:
                time.sleep(delay)  # let the group fill
            self.wake.clear()
            take = min(len(queue), max_batch)
            batch = [queue.popleft() for _ in range(take)]
            if queue:
                self.wake.set()
            if batch:
                last_start = time.monotonic()
                kept, dropped = self._commit(connection, batch)
                self._on_commit(kept, dropped)
            if self._stopping and not queue:
                return

    def _commit(self, connection: Connection, batch: list[Queued]) -> tuple[list[Queued], list[Queued]]:
        """Commit the batch's rows but those of lost runs; (committed, dropped)."""
        delays = iter(_RETRY_DELAYS)
        retry = False
        while True:
            try:
                with connection.begin():
                    kept = self._fenced(connection, batch)
                    if kept:
                        self._insert(connection, [queued[0] for queued in kept], retry=retry)
                if len(kept) == len(batch):
                    return kept, []
                ids = {id(queued) for queued in kept}
                return kept, [queued for queued in batch if id(queued) not in ids]
            except self._duplicate:
                if retry:
                    raise
            except self._retryable:  # locked, busy, I/O, a lost connection: worth another try
                delay = next(delays, None)
                if delay is None:
                    raise
                time.sleep(delay)
            retry = True

    def _fenced(self, connection: Connection, batch: list[Queued]) -> list[Queued]:
        """The batch without the rows of lost runs. A fenced run (``SessionLog.fence``) is lost
        once another executor has it: checked here, in the commit's transaction, its row
        share-locked until the commit, so a takeover's claim is ordered before or after it."""
        expected: dict[str, set[int]] = {}
        for _row, run, _payload in batch:
            if run.executor is not None and not run.lost and self._fences:
                expected.setdefault(run.executor, set()).add(run.run_key)
        for executor, keys in expected.items():
            cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
            try:
                cursor.execute(_STILL_OURS, (sorted(keys), executor))
                ours = {int(row[0]) for row in cursor.fetchall()}
            finally:
                cursor.close()
            for _row, run, _payload in batch:
                if run.run_key in keys and run.run_key not in ours:
                    run.lost = True
        return [queued for queued in batch if not queued[1].lost]


# A fenced run's rows commit while it is this executor's or nobody's (released, not yet taken).
_STILL_OURS: Final = (
    "SELECT run_key FROM runs WHERE run_key = ANY(%s) AND (executor_id = %s OR executor_id IS NULL) FOR SHARE"
)


def run_position(engine: Engine, run_id: str) -> tuple[int, int]:
    """The run's integer key and the last committed seq (0 for an empty log)."""
    last = select(func.coalesce(func.max(log_entries.c.seq), 0)).where(log_entries.c.run_key == runs.c.run_key)
    query = select(runs.c.run_key, last.scalar_subquery()).where(runs.c.id == run_id)
    with engine.connect().execution_options(**READ_ONLY) as connection:
        row = connection.execute(query).one_or_none()
    if row is None:
        raise NotFoundError("run_not_found", f"no run {run_id}")
    return int(row[0]), int(row[1])


class StoredEntries:
    """Committed entries whose payloads are decoded one at a time, as they are iterated.

    A fold that lets each entry go before taking the next keeps one decoded payload alive
    instead of a page of them: a page decoded at once puts millions of containers before the
    cyclic garbage collector, which traverses them again at every collection (reading a
    200k-entry run took 4.0 s of CPU so, 1.6 s with the collector off). Iterating twice
    decodes twice.
    """

    __slots__ = ("_rows", "_run_id")

    def __init__(self, run_id: str, rows: Sequence[StoredRow]) -> None:
        self._run_id = run_id
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def last_seq(self) -> int | None:
        """The seq of the last entry, None when there is none."""
        return self._rows[-1][0] if self._rows else None

    def __iter__(self) -> Iterator[LogEntry]:
        run_id = self._run_id
        loads = decode_json
        for seq, ts, direction, method, payload, text in self._rows:
            yield {
                "run_id": run_id,
                "seq": seq,
                "ts": ts,
                "direction": cast(Direction, direction),
                "method": method,
                "payload": loads(payload)
                if payload is not None
                else {"params": {"update": {"sessionUpdate": "agent_message_chunk", "content": {"text": text}}}},
            }


def read_stored(
    engine: Engine,
    run_id: str,
    run_key: int,
    after: int,
    until: int | None,
    limit: int | None = None,
    *,
    chunks_as_text: bool = False,
) -> StoredEntries:
    """Committed entries with ``after < seq <= until``, in seq order, not decoded yet.

    ``chunks_as_text``: an agent chunk with a ``chunk_text`` gets the payload the conversation
    reads of it (``params.update.sessionUpdate`` and ``content.text``) instead of its own,
    which is then not even selected.
    """
    # The driver's own cursor and its plain tuples: SQLAlchemy's rows cost ~0.2 s more on a
    # 200k-entry rebuild (bench/resume.py), for nothing a fold reads.
    mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
    payload = "CASE WHEN chunk_text IS NULL THEN payload END, chunk_text" if chunks_as_text else "payload, NULL"
    sql = f"SELECT seq, ts, direction, method, {payload} FROM log_entries WHERE run_key = {mark} AND seq > {mark}"
    arguments: tuple[int, ...] = (run_key, after)
    if until is not None:
        sql, arguments = sql + f" AND seq <= {mark}", (*arguments, until)
    sql += " ORDER BY seq"
    if limit is not None:
        sql, arguments = sql + f" LIMIT {mark}", (*arguments, limit)
    with engine.connect().execution_options(**READ_ONLY) as connection, connection.begin():
        cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(sql, arguments)
            rows = cursor.fetchall()
        finally:
            cursor.close()
    return StoredEntries(run_id, cast(Sequence[StoredRow], rows))


def read_entries(
    engine: Engine, run_id: str, run_key: int, after: int, until: int | None, limit: int | None = None
) -> list[LogEntry]:
    """Committed entries with ``after < seq <= until``, in seq order."""
    return list(read_stored(engine, run_id, run_key, after, until, limit))  # every payload whole


def last_params(engine: Engine, run_key: int, method: str) -> dict[str, Any] | None:
    """The ``params`` of the run's latest committed entry with ``method`` (None: there is none)."""
    columns = log_entries.c
    query = (
        select(columns.payload)
        .where(columns.run_key == run_key, columns.method == method)
        .order_by(columns.seq.desc())
        .limit(1)
    )
    with engine.connect().execution_options(**READ_ONLY) as connection:
        row = connection.execute(query).one_or_none()
    if row is None:
        return None
    params = decode_json(row[0]).get("params")
    return params if isinstance(params, dict) else None
