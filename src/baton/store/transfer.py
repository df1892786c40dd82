"""Every stored row of one run, read out and written back in pages (``baton export`` / ``baton import``).

Blocking functions (call them through ``asyncio.to_thread``). :func:`reading_run_rows` opens
one read transaction, so the rows agree with each other, and hands each table out in pages of
``PAGE`` rows (bounded memory, however long the log). :func:`insert_run_rows` writes pages into
another database in **one** transaction — the run appears whole or not at all, however far the
pages got — under the same run id, refused with ``run_exists`` when that id (or one of its gate
ids) is taken. :func:`delete_run_rows` removes an imported run again (the import's compensation
when a later step fails). Log payloads travel as the stored JSON text, never re-encoded.
:func:`read_run_rows` collects a run whole (for tests and small runs).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import Engine, Table, delete, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError

from baton.errors import RefusedError
from baton.store._writer import _inserter
from baton.store.engine import READ_ONLY
from baton.store.tables import (
    conversation_state,
    gates,
    inbox,
    log_entries,
    run_transitions,
    runner_events,
    runs,
    snapshots,
    tasks,
)

__all__ = [
    "PAGE",
    "TABLES",
    "RunHead",
    "RunReader",
    "RunRows",
    "delete_run_rows",
    "insert_run_rows",
    "read_run_rows",
    "reading_run_rows",
]

_LOG_COLUMNS: Final = ("seq", "ts", "direction", "method", "payload")
PAGE: Final = 5000
# The run's tables besides ``runs`` and ``tasks``, in the order an import inserts them.
TABLES: Final = ("transitions", "log", "runner_events", "snapshots", "gates", "conversation_state")
_TABLE: Final[dict[str, Table]] = {
    "transitions": run_transitions,
    "log": log_entries,
    "runner_events": runner_events,
    "snapshots": snapshots,
    "gates": gates,
    "conversation_state": conversation_state,
}

Page = list[dict[str, Any]]


@dataclass
class RunHead:
    """The run's own row and its task's (None when it has none)."""

    run: dict[str, Any]
    task: dict[str, Any] | None = None


@dataclass
class RunRows:
    """One run as the store holds it; every list is in its table's natural order."""

    run: dict[str, Any]
    task: dict[str, Any] | None = None
    transitions: list[dict[str, Any]] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)  # payload: the stored JSON text
    runner_events: list[dict[str, Any]] = field(default_factory=list)
    conversation_state: dict[str, Any] | None = None
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    gates: list[dict[str, Any]] = field(default_factory=list)


def _without_key(row: Mapping[Any, Any], *drop: str) -> dict[str, Any]:
    return {name: value for name, value in row.items() if name not in ("run_key", *drop)}


def _columns(table: Table, *drop: str) -> list[Any]:
    return [column for column in table.c if column.name not in ("run_key", *drop)]


class RunReader:
    """One run's rows inside the read transaction :func:`reading_run_rows` holds."""

    def __init__(self, connection: Connection, run_key: int, head: RunHead, page: int) -> None:
        self._connection = connection
        self._run_key = run_key
        self._page = page
        self.head = head

    def pages(self, name: str) -> Iterator[Page]:
        """Table ``name`` (one of ``TABLES``) in pages of at most ``page`` rows, in its natural order.

        Snapshots come ordered by number (``s2`` before ``s10``): they are few, and sorted here."""
        if name == "log":
            yield from self._log_pages()
            return
        table = _TABLE[name]
        drop = ("id",) if table is run_transitions else ()
        order = {
            "transitions": run_transitions.c.id,
            "runner_events": runner_events.c.seq,
            "snapshots": snapshots.c.id,
            "gates": gates.c.created_at,
            "conversation_state": conversation_state.c.run_key,
        }[name]
        query = select(*_columns(table, *drop)).where(table.c.run_key == self._run_key).order_by(order)
        result = self._connection.execution_options(yield_per=self._page).execute(query).mappings()
        if name == "snapshots":
            rows = sorted((dict(row) for row in result), key=lambda snapshot: int(str(snapshot["id"])[1:]))
            for start in range(0, len(rows), self._page):
                yield rows[start : start + self._page]
            return
        for part in result.partitions():
            yield [dict(row) for row in part]

    def _log_pages(self) -> Iterator[Page]:
        after = 0
        while True:  # keyset pages: each one an index range scan
            page = self._connection.execute(
                select(*[log_entries.c[name] for name in _LOG_COLUMNS])
                .where(log_entries.c.run_key == self._run_key, log_entries.c.seq > after)
                .order_by(log_entries.c.seq)
                .limit(self._page)
            ).mappings()
            entries = [dict(entry) for entry in page]
            if entries:
                yield entries
            if len(entries) < self._page:
                return
            after = int(entries[-1]["seq"])


@contextmanager
def reading_run_rows(engine: Engine, run_id: str, *, page: int = PAGE) -> Iterator[RunReader | None]:
    """A :class:`RunReader` of the run in one read transaction, or None when the store has no such run."""
    with engine.connect().execution_options(**READ_ONLY) as connection, connection.begin():
        row = connection.execute(select(runs).where(runs.c.id == run_id)).mappings().one_or_none()
        if row is None:
            yield None
            return
        head = RunHead(run=_without_key(row))
        if row["task_id"] is not None:
            task = connection.execute(select(tasks).where(tasks.c.id == row["task_id"])).mappings().one_or_none()
            head.task = dict(task) if task is not None else None
        yield RunReader(connection, int(row["run_key"]), head, page)


def read_run_rows(engine: Engine, run_id: str) -> RunRows | None:
    """The run's rows, whole, or None when the store has no such run."""
    with reading_run_rows(engine, run_id) as reader:
        if reader is None:
            return None
        result = RunRows(run=reader.head.run, task=reader.head.task)
        result.transitions = [row for page in reader.pages("transitions") for row in page]
        result.log = [row for page in reader.pages("log") for row in page]
        result.runner_events = [row for page in reader.pages("runner_events") for row in page]
        result.snapshots = [row for page in reader.pages("snapshots") for row in page]
        result.gates = [row for page in reader.pages("gates") for row in page]
        state = [row for page in reader.pages("conversation_state") for row in page]
        result.conversation_state = state[0] if state else None
    return result


def insert_run_rows(engine: Engine, head: RunHead, pages: Iterable[tuple[str, Page]]) -> int:
    """Write the run ``head`` and its ``pages`` (``(table name, rows)``, any number per table) as a new
    run in one transaction; ``run_exists`` when its id is taken. Any exception ``pages`` raises
    rolls the whole run back. The number of rows written besides the run's and its task's."""
    run_id = head.run["id"]
    written = 0
    try:
        with engine.begin() as connection:
            taken = connection.execute(select(runs.c.run_key).where(runs.c.id == run_id)).scalar_one_or_none()
            if taken is not None:
                raise RefusedError("run_exists", f"this BATON_HOME already has run {run_id}")
            if head.task is not None:
                known = connection.execute(select(tasks.c.id).where(tasks.c.id == head.task["id"])).scalar()
                if known is None:
                    connection.execute(insert(tasks).values(**head.task))
            run_key = connection.execute(insert(runs).values(**head.run).returning(runs.c.run_key)).scalar_one()
            log_insert = _inserter(engine)  # the session log's fast path: multi-row VALUES, or COPY
            driver_error: type[Exception] = engine.dialect.loaded_dbapi.Error
            for name, rows in pages:
                if name == "log":
                    values = [
                        (run_key, *(row[column] for column in _LOG_COLUMNS), row.get("chunk_text")) for row in rows
                    ]
                    try:
                        log_insert(connection, values, retry=False)
                    except driver_error as exc:  # the driver's own cursor: wrapped as SQLAlchemy would
                        raise DBAPIError.instance("INSERT INTO log_entries", None, exc, driver_error) from exc
                elif rows:
                    connection.execute(insert(_TABLE[name]), [{**row, "run_key": run_key} for row in rows])
                written += len(rows)
    except IntegrityError as exc:
        raise RefusedError("run_exists", f"cannot import run {run_id}: {exc.orig}") from exc
    return written


def delete_run_rows(engine: Engine, run_id: str) -> None:
    """Remove every row of the run (not its task, which other runs may share)."""
    with engine.begin() as connection:
        run_key = connection.execute(select(runs.c.run_key).where(runs.c.id == run_id)).scalar_one_or_none()
        if run_key is None:
            return
        for table in (conversation_state, gates, snapshots, runner_events, log_entries, inbox, run_transitions):
            connection.execute(delete(table).where(table.c.run_key == run_key))
        connection.execute(delete(runs).where(runs.c.run_key == run_key))
