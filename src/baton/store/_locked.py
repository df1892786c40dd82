"""A run's row locked in a transaction: its record, its status change and log entries, committed together.

``lock_run`` takes the run's row lock (``SELECT … FOR UPDATE`` on Postgres; on SQLite every
transaction baton writes in begins with ``BEGIN IMMEDIATE``, which already serializes writers).
Two processes changing one run's status at once then record both transitions in order, and a
:class:`LockedRun` numbers the entries it appends after the last one committed, so no two
writers number entries of the run at once — as long as no live process executes the run
(whose :class:`~baton.store.log.SessionLog` numbers its entries in memory).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sqlalchemy import Row, func, insert, select, update
from sqlalchemy.engine import Connection

from baton.errors import NotFoundError
from baton.events.entry import Direction, utc_timestamp
from baton.store._gates import deny_pending
from baton.store.records import TERMINAL_STATUSES, GateRecord, RunRecord, chunk_text
from baton.store.redact import Redactor
from baton.store.tables import inbox, log_entries, run_transitions, runs
from baton.store.transitions import check_transition

__all__ = ["RECORD_COLUMNS", "LockedRun", "lock_run", "run_record", "update_locked_run"]

RECORD_COLUMNS: Final = [column for column in runs.c if column.name != "run_key"]
_Locked = Row[Any, Any, Any, Any, Any, Any]  # run_key, id, status, started_at, finished_at, executor_id


def run_record(row: Row[Any]) -> RunRecord:
    return RunRecord(**row._asdict())


def lock_run(connection: Connection, run_id: str) -> _Locked:
    """The run's ``run_key, id, status, started_at, finished_at, executor_id`` with its row locked
    (``run_not_found``)."""
    found = connection.execute(
        select(runs.c.run_key, runs.c.id, runs.c.status, runs.c.started_at, runs.c.finished_at, runs.c.executor_id)
        .where(runs.c.id == run_id)
        .with_for_update()
    ).one_or_none()
    if found is None:
        raise NotFoundError("run_not_found", f"no run {run_id}")
    return found


def update_locked_run(connection: Connection, found: _Locked, fields: Mapping[str, Any]) -> RunRecord:
    """Change the locked run's fields; a new ``status`` is recorded as a transition (``Store.update_run``),
    one the table does not allow is refused (``invalid_transition``, baton.store.transitions)."""
    values = dict(fields)
    status = values.get("status")
    if status is not None:
        check_transition(found.id, found.status, status)
    now = utc_timestamp()
    if status == "running" and found.started_at is None:
        values.setdefault("started_at", now)
    if status in TERMINAL_STATUSES and found.finished_at is None:
        values.setdefault("finished_at", now)
    if values:
        connection.execute(update(runs).where(runs.c.run_key == found.run_key).values(**values))
    if status is not None and status != found.status:
        connection.execute(
            insert(run_transitions).values(
                run_key=found.run_key,
                from_status=found.status,
                to_status=status,
                reason=values.get("status_reason"),
                at=now,
            )
        )
    return run_record(connection.execute(select(*RECORD_COLUMNS).where(runs.c.run_key == found.run_key)).one())


class LockedRun:
    """What ``Store.with_locked_run`` hands its work: the run as locked, and the changes to commit with it."""

    def __init__(self, connection: Connection, found: _Locked, redactor: Redactor) -> None:
        self.connection = connection
        self.run_key: int = found.run_key
        self._found = found
        self._redactor = redactor
        query = select(*RECORD_COLUMNS).where(runs.c.run_key == self.run_key)
        self.record = run_record(connection.execute(query).one())
        self._rows: list[dict[str, Any]] = []
        self._next_seq: int | None = None

    def update(self, **fields: Any) -> RunRecord:
        """Change the run's fields in this transaction (a new status is a transition)."""
        self.record = update_locked_run(self.connection, self._found, fields)
        if "status" in fields:  # a later change in this transaction moves from this one
            self._found = lock_run(self.connection, self.record.id)
        return self.record

    def append(self, direction: Direction, method: str | None, payload: dict[str, Any]) -> int:
        """Queue one log entry (redacted) for this transaction; its seq."""
        if self._next_seq is None:
            last = self.connection.execute(
                select(func.coalesce(func.max(log_entries.c.seq), 0)).where(log_entries.c.run_key == self.run_key)
            ).scalar_one()
            self._next_seq = int(last) + 1
        seq = self._next_seq
        self._next_seq += 1
        text, redacted = self._redactor.redact_json(payload)
        self._rows.append(
            {"run_key": self.run_key, "seq": seq, "ts": utc_timestamp(), "direction": direction, "method": method,
             "payload": text, "chunk_text": chunk_text(method, redacted)}
        )  # fmt: skip
        return seq

    def deny_pending_gates(self, decision: dict[str, Any], decided_by: str) -> list[GateRecord]:
        """Deny every pending gate of the run in this transaction (each wakes the run); the gates denied."""
        return deny_pending(self.connection, self.run_key, self.record.id, decision, decided_by)

    def take_inbox(self, inbox_id: int, taken_by: str) -> None:
        """Mark the run's inbox command taken in this transaction (when nobody took it yet)."""
        taken = update(inbox).where(inbox.c.id == inbox_id, inbox.c.run_key == self.run_key, inbox.c.taken_at.is_(None))
        self.connection.execute(taken.values(taken_at=utc_timestamp(), taken_by=taken_by))

    def write_entries(self) -> None:
        """Insert the appended entries (``Store.with_locked_run`` calls it before committing)."""
        if self._rows:
            self.connection.execute(insert(log_entries), self._rows)
            self._rows = []
