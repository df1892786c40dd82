"""The session log's SQL: the group-commit writer thread and the reads.

One thread with one connection commits every queued row in groups: ``BEGIN IMMEDIATE``,
multi-row ``INSERT … VALUES (…), (…)`` with a few fixed-size templates (``executemany``
releases the GIL per row and collapses next to a busy thread), ``ON CONFLICT DO NOTHING`` so
a retried group is idempotent.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from itertools import chain
from typing import Any, Final, cast

from sqlalchemy import Engine, func, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from baton.errors import NotFoundError
from baton.events.entry import Direction, LogEntry
from baton.store.engine import READ_ONLY
from baton.store.tables import log_entries, runs

__all__ = ["LogWriter", "Queued", "Row", "read_entries", "run_position"]

# (run_key, seq, ts, direction, method, payload JSON text): one log_entries row.
Row = tuple[int, int, str, str, str | None, str]
# The row, and the entry subscribers see once it is committed.
Queued = tuple[Row, LogEntry]

_TEMPLATE_SIZES: Final = (1000, 100, 10, 1)  # 6 columns x 1000 rows < SQLite's 32766 variables
_RETRY_DELAYS: Final = (0.05, 0.25, 1.0)


def _templates(engine: Engine) -> dict[int, str]:
    mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
    row = "(" + ",".join([mark] * 6) + ")"
    head = "INSERT INTO log_entries (run_key, seq, ts, direction, method, payload) VALUES "
    return {size: head + ",".join([row] * size) + " ON CONFLICT DO NOTHING" for size in _TEMPLATE_SIZES}


class LogWriter(threading.Thread):
    """Drains ``queue`` into the database, at most one commit per ``commit_interval``."""

    def __init__(
        self,
        engine: Engine,
        queue: deque[Queued],
        *,
        commit_interval: float,
        max_batch: int,
        on_commit: Callable[[list[Queued]], None],
        on_failure: Callable[[BaseException], None],
    ) -> None:
        super().__init__(name="baton-log-writer", daemon=True)
        self._engine = engine
        self._queue = queue
        self._interval = commit_interval
        self._max_batch = max_batch
        self._on_commit = on_commit
        self._on_failure = on_failure
        self._templates = _templates(engine)
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
        last_commit = 0.0
        while True:
            self.wake.wait()
            delay = last_commit + self._interval - time.monotonic()
            if delay > 0 and not self._stopping:
                time.sleep(delay)  # let the group fill
            self.wake.clear()
            batch: list[Queued] = []
            while self._queue and len(batch) < self._max_batch:
                batch.append(self._queue.popleft())
            if self._queue:
                self.wake.set()
            if batch:
                self._commit(connection, batch)
                last_commit = time.monotonic()
                self._on_commit(batch)
            if self._stopping and not self._queue:
                return

    def _commit(self, connection: Connection, batch: list[Queued]) -> None:
        for delay in (*_RETRY_DELAYS, None):
            try:
                with connection.begin():
                    self._insert(connection, [row for row, _entry in batch])
                return
            except OperationalError:  # locked, busy, I/O: worth another try
                if delay is None:
                    raise
                time.sleep(delay)

    def _insert(self, connection: Connection, rows: list[Row]) -> None:
        start = 0
        for size in _TEMPLATE_SIZES:
            while len(rows) - start >= size:
                params = tuple(chain.from_iterable(rows[start : start + size]))
                connection.exec_driver_sql(self._templates[size], params)
                start += size


def run_position(engine: Engine, run_id: str) -> tuple[int, int]:
    """The run's integer key and the last committed seq (0 for an empty log)."""
    last = select(func.coalesce(func.max(log_entries.c.seq), 0)).where(log_entries.c.run_key == runs.c.run_key)
    query = select(runs.c.run_key, last.scalar_subquery()).where(runs.c.id == run_id)
    with engine.connect().execution_options(**READ_ONLY) as connection:
        row = connection.execute(query).one_or_none()
    if row is None:
        raise NotFoundError("run_not_found", f"no run {run_id}")
    return int(row[0]), int(row[1])


def read_entries(
    engine: Engine, run_id: str, run_key: int, after: int, until: int | None, limit: int | None = None
) -> list[LogEntry]:
    """Committed entries with ``after < seq <= until``, in seq order."""
    columns = log_entries.c
    query = select(columns.seq, columns.ts, columns.direction, columns.method, columns.payload).where(
        columns.run_key == run_key, columns.seq > after
    )
    if until is not None:
        query = query.where(columns.seq <= until)
    query = query.order_by(columns.seq).limit(limit)
    with engine.connect().execution_options(**READ_ONLY) as connection:
        rows = connection.execute(query).all()
    return [
        LogEntry(
            run_id=run_id,
            seq=seq,
            ts=ts,
            direction=cast(Direction, direction),
            method=method,
            payload=cast(dict[str, Any], json.loads(payload)),
        )
        for seq, ts, direction, method, payload in rows
    ]
