"""Every stored row of one run, read out and written back whole (``baton export`` / ``baton import``).

Blocking functions (call them through ``asyncio.to_thread``). :func:`read_run_rows` reads the
run in one read transaction, so the rows agree with each other. :func:`insert_run_rows` writes
them into another database in **one** transaction — the run appears whole or not at all —
under the same run id, refused with ``run_exists`` when that id (or one of its gate ids) is
taken. :func:`delete_run_rows` removes an imported run again (the import's compensation when a
later step fails). Log payloads travel as the stored JSON text, never re-encoded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import Engine, Table, delete, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from baton.errors import RefusedError
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

__all__ = ["RunRows", "delete_run_rows", "insert_run_rows", "read_run_rows"]

_LOG_COLUMNS: Final = ("seq", "ts", "direction", "method", "payload")
_PAGE: Final = 5000


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


def read_run_rows(engine: Engine, run_id: str) -> RunRows | None:
    """The run's rows, or None when the store has no such run."""
    with engine.connect().execution_options(**READ_ONLY) as connection, connection.begin():
        row = connection.execute(select(runs).where(runs.c.id == run_id)).mappings().one_or_none()
        if row is None:
            return None
        run_key = row["run_key"]
        result = RunRows(run=_without_key(row))
        if row["task_id"] is not None:
            task = connection.execute(select(tasks).where(tasks.c.id == row["task_id"])).mappings().one_or_none()
            result.task = dict(task) if task is not None else None
        result.transitions = _rows(connection, run_transitions, run_key, run_transitions.c.id, drop=("id",))
        result.runner_events = _rows(connection, runner_events, run_key, runner_events.c.seq)
        result.snapshots = _rows(connection, snapshots, run_key, snapshots.c.id)
        result.snapshots.sort(key=lambda snapshot: int(str(snapshot["id"])[1:]))
        result.gates = _rows(connection, gates, run_key, gates.c.created_at)
        state = _rows(connection, conversation_state, run_key, conversation_state.c.run_key)
        result.conversation_state = state[0] if state else None
        after = 0
        while True:  # the log in pages, so a long run is not one huge result set
            page = connection.execute(
                select(*[log_entries.c[name] for name in _LOG_COLUMNS])
                .where(log_entries.c.run_key == run_key, log_entries.c.seq > after)
                .order_by(log_entries.c.seq)
                .limit(_PAGE)
            ).mappings()
            entries = [dict(entry) for entry in page]
            result.log.extend(entries)
            if len(entries) < _PAGE:
                break
            after = int(entries[-1]["seq"])
    return result


def _rows(connection: Connection, table: Table, run_key: int, order: Any, drop: tuple[str, ...] = ()) -> list[Any]:
    query = select(*_columns(table, *drop)).where(table.c.run_key == run_key).order_by(order)
    return [dict(row) for row in connection.execute(query).mappings()]


def insert_run_rows(engine: Engine, rows: RunRows) -> None:
    """Write ``rows`` as a new run in one transaction; ``run_exists`` when its id is taken."""
    run_id = rows.run["id"]
    try:
        with engine.begin() as connection:
            taken = connection.execute(select(runs.c.run_key).where(runs.c.id == run_id)).scalar_one_or_none()
            if taken is not None:
                raise RefusedError("run_exists", f"this BATON_HOME already has run {run_id}")
            if rows.task is not None:
                known = connection.execute(select(tasks.c.id).where(tasks.c.id == rows.task["id"])).scalar()
                if known is None:
                    connection.execute(insert(tasks).values(**rows.task))
            run_key = connection.execute(insert(runs).values(**rows.run).returning(runs.c.run_key)).scalar_one()
            for table, values in (
                (run_transitions, rows.transitions),
                (log_entries, rows.log),
                (runner_events, rows.runner_events),
                (snapshots, rows.snapshots),
                (gates, rows.gates),
                (conversation_state, [rows.conversation_state] if rows.conversation_state else []),
            ):
                for start in range(0, len(values), _PAGE):
                    page = [{**value, "run_key": run_key} for value in values[start : start + _PAGE]]
                    connection.execute(insert(table), page)
    except IntegrityError as exc:
        raise RefusedError("run_exists", f"cannot import run {run_id}: {exc.orig}") from exc


def delete_run_rows(engine: Engine, run_id: str) -> None:
    """Remove every row of the run (not its task, which other runs may share)."""
    with engine.begin() as connection:
        run_key = connection.execute(select(runs.c.run_key).where(runs.c.id == run_id)).scalar_one_or_none()
        if run_key is None:
            return
        for table in (conversation_state, gates, snapshots, runner_events, log_entries, inbox, run_transitions):
            connection.execute(delete(table).where(table.c.run_key == run_key))
        connection.execute(delete(runs).where(runs.c.run_key == run_key))
