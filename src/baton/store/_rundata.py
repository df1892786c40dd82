"""The store's per-run rows besides the log: tasks, runner events, the inbox, conversation
state and snapshots (blocking functions; :class:`~baton.store.store.Store` runs them in a
thread).

Writes that a step may repeat after a crash are idempotent: runner events and snapshots are
written once per key (``ON CONFLICT DO NOTHING``), the conversation state is an upsert.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from sqlalchemy import Engine, Insert, Table, insert, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from baton.errors import NotFoundError, UsageError
from baton.events.entry import utc_timestamp
from baton.store.doorbell import ring_after_commit
from baton.store.engine import READ_ONLY
from baton.store.records import TaskRecord
from baton.store.tables import conversation_state, inbox, runner_events, runs, snapshots, tasks

__all__ = [
    "INBOX_CHANNEL",
    "SNAPSHOT_LISTS",
    "add_snapshot",
    "create_task",
    "get_snapshot",
    "get_task",
    "inbox_insert",
    "inbox_pending",
    "inbox_put",
    "inbox_take",
    "list_snapshots",
    "load_conversation_state",
    "read_runner_events",
    "run_key_of",
    "save_conversation_state",
    "save_runner_events",
]

INBOX_CHANNEL: Final = "baton_inbox"
"""On Postgres, ``inbox_put`` sends ``NOTIFY baton_inbox, '<run_id>'`` when it commits."""

SNAPSHOT_LISTS: Final = ("added", "modified", "deleted", "renamed", "skipped")
_SNAPSHOT_ID: Final = re.compile(r"s([1-9][0-9]*)")
_EVENT_COLUMNS: Final = ("seq", "log_seq", "ts", "type", "data")


def run_key_of(connection: Connection, run_id: str) -> int:
    run_key = connection.execute(select(runs.c.run_key).where(runs.c.id == run_id)).scalar_one_or_none()
    if run_key is None:
        raise NotFoundError("run_not_found", f"no run {run_id}")
    return int(run_key)


def _dialect_insert(connection: Connection, table: Table) -> Any:
    """``INSERT`` with the dialect's ``on_conflict_*`` methods (SQLite and Postgres alike)."""
    if connection.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def _insert_once(connection: Connection, table: Table) -> Insert:
    statement: Insert = _dialect_insert(connection, table).on_conflict_do_nothing()
    return statement


# Tasks.


def create_task(engine: Engine, values: Mapping[str, Any]) -> TaskRecord:
    with engine.begin() as connection:
        connection.execute(insert(tasks).values(**values))
    return TaskRecord(**{**values, "metadata": dict(values["metadata"] or {})})


def get_task(engine: Engine, task_id: str) -> TaskRecord:
    with engine.connect().execution_options(**READ_ONLY) as connection:
        row = connection.execute(select(tasks).where(tasks.c.id == task_id)).one_or_none()
    if row is None:
        raise NotFoundError("task_not_found", f"no task {task_id}")
    values = row._asdict()
    return TaskRecord(**{**values, "metadata": values["metadata"] or {}})


# Runner events.


def save_runner_events(engine: Engine, run_id: str, events: Iterable[Mapping[str, Any]]) -> None:
    with engine.begin() as connection:
        run_key = run_key_of(connection, run_id)
        rows = [{"run_key": run_key, **{name: event[name] for name in _EVENT_COLUMNS}} for event in events]
        if rows:
            connection.execute(_insert_once(connection, runner_events), rows)


def read_runner_events(engine: Engine, run_id: str, after: int, limit: int | None) -> list[dict[str, Any]]:
    columns = [runner_events.c[name] for name in _EVENT_COLUMNS]
    with engine.connect().execution_options(**READ_ONLY) as connection:
        run_key = run_key_of(connection, run_id)
        query = (
            select(*columns)
            .where(runner_events.c.run_key == run_key, runner_events.c.seq > after)
            .order_by(runner_events.c.seq)
            .limit(limit)
        )
        return [{"run_id": run_id, **row._asdict()} for row in connection.execute(query)]


# The inbox.


def inbox_put(engine: Engine, run_id: str, kind: str, payload: Mapping[str, Any]) -> int:
    with engine.begin() as connection:
        return inbox_insert(connection, run_key_of(connection, run_id), run_id, kind, payload)


def inbox_insert(connection: Connection, run_key: int, run_id: str, kind: str, payload: Mapping[str, Any]) -> int:
    """``inbox_put`` inside a transaction of the caller's (the gate ledger records a decision
    and its inbox command in one)."""
    values = {"run_key": run_key, "created_at": utc_timestamp(), "kind": kind, "payload": dict(payload)}
    message_id = connection.execute(insert(inbox).values(**values).returning(inbox.c.id)).scalar_one()
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_notify(:channel, :run_id)"), {"channel": INBOX_CHANNEL, "run_id": run_id})
    else:  # SQLite: the local waiters' doorbells, once this transaction has committed
        ring_after_commit(connection.info)
    return int(message_id)


def inbox_take(engine: Engine, run_id: str, taken_by: str) -> list[dict[str, Any]]:
    # One UPDATE … RETURNING: SQLite serializes writers (BEGIN IMMEDIATE); on Postgres a
    # concurrent taker blocks on the row lock and then re-checks "taken_at IS NULL", so every
    # message is taken exactly once.
    with engine.begin() as connection:
        run_key = run_key_of(connection, run_id)
        statement = (
            update(inbox)
            .where(inbox.c.run_key == run_key, inbox.c.taken_at.is_(None))
            .values(taken_at=utc_timestamp(), taken_by=taken_by)
            .returning(
                inbox.c.id, inbox.c.created_at, inbox.c.kind, inbox.c.payload, inbox.c.taken_at, inbox.c.taken_by
            )
        )
        rows = [{"run_id": run_id, **row._asdict()} for row in connection.execute(statement)]
    rows.sort(key=lambda row: int(row["id"]))
    return rows


def inbox_pending(engine: Engine, run_id: str) -> list[dict[str, Any]]:
    with engine.connect().execution_options(**READ_ONLY) as connection:
        run_key = run_key_of(connection, run_id)
        query = (
            select(inbox.c.id, inbox.c.created_at, inbox.c.kind, inbox.c.payload)
            .where(inbox.c.run_key == run_key, inbox.c.taken_at.is_(None))
            .order_by(inbox.c.id)
        )
        return [{"run_id": run_id, **row._asdict()} for row in connection.execute(query)]


# Conversation state.


def save_conversation_state(engine: Engine, run_id: str, upto_seq: int, state: Mapping[str, Any]) -> None:
    with engine.begin() as connection:
        run_key = run_key_of(connection, run_id)
        values = {"run_key": run_key, "upto_seq": upto_seq, "state": dict(state), "updated_at": utc_timestamp()}
        statement = _dialect_insert(connection, conversation_state).values(**values)
        statement = statement.on_conflict_do_update(
            index_elements=[conversation_state.c.run_key],
            set_={name: statement.excluded[name] for name in ("upto_seq", "state", "updated_at")},
        )
        connection.execute(statement)


def load_conversation_state(engine: Engine, run_id: str) -> tuple[int, dict[str, Any]] | None:
    with engine.connect().execution_options(**READ_ONLY) as connection:
        run_key = run_key_of(connection, run_id)
        row = connection.execute(
            select(conversation_state.c.upto_seq, conversation_state.c.state).where(
                conversation_state.c.run_key == run_key
            )
        ).one_or_none()
    if row is None:
        return None
    return int(row.upto_seq), dict(row.state)


# Snapshots.


def add_snapshot(engine: Engine, run_id: str, snapshot: Mapping[str, Any]) -> None:
    snapshot_id = snapshot.get("id")
    if not isinstance(snapshot_id, str) or not _SNAPSHOT_ID.fullmatch(snapshot_id):
        raise UsageError("invalid_argument", f"a snapshot id is s1, s2 …, not {snapshot_id!r}")
    if not isinstance(snapshot.get("tree_hash"), str):
        raise UsageError("invalid_argument", "a snapshot needs its tree_hash")
    known = {column.name for column in snapshots.c} - {"run_key"}
    unknown = set(snapshot) - known - {"run_id"}
    if unknown:
        raise UsageError("invalid_argument", f"unknown snapshot fields {sorted(unknown)}")
    values: dict[str, Any] = {name: snapshot[name] for name in known if name in snapshot}
    for name in SNAPSHOT_LISTS:
        values[name] = list(values.get(name) or [])
    values.setdefault("created_at", utc_timestamp())
    with engine.begin() as connection:
        values["run_key"] = run_key_of(connection, run_id)
        connection.execute(_insert_once(connection, snapshots).values(**values))


def list_snapshots(engine: Engine, run_id: str) -> list[dict[str, Any]]:
    with engine.connect().execution_options(**READ_ONLY) as connection:
        run_key = run_key_of(connection, run_id)
        rows = connection.execute(_snapshot_query().where(snapshots.c.run_key == run_key)).all()
    found = [{"run_id": run_id, **row._asdict()} for row in rows]
    found.sort(key=lambda snapshot: int(snapshot["id"][1:]))
    return found


def get_snapshot(engine: Engine, run_id: str, snapshot_id: str) -> dict[str, Any]:
    with engine.connect().execution_options(**READ_ONLY) as connection:
        run_key = run_key_of(connection, run_id)
        row = connection.execute(
            _snapshot_query().where(snapshots.c.run_key == run_key, snapshots.c.id == snapshot_id)
        ).one_or_none()
    if row is None:
        raise NotFoundError("snapshot_not_found", f"run {run_id} has no snapshot {snapshot_id}")
    return {"run_id": run_id, **row._asdict()}


def _snapshot_query() -> Any:
    return select(*[column for column in snapshots.c if column.name != "run_key"])
