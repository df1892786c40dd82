"""Webhook deliveries in the store: the events read from the tables, and each delivery's row, claim
and outcome (baton.notify sends them; docs/web.md "Webhooks").

- **Events** are read from the rows, not from runs' logs: gates opened (``gates.created_at``),
  gates decided (``decided_at``: approved, denied, answered, expired; a superseded gate is no
  decision) and runs ended (``runs.finished_at``: finished, failed), each after a position
  (a timestamp). ``webhook_cursor`` keeps how far they were read.
- **A delivery** is one row per event and URL (``UNIQUE(url, event_key)``: any number of
  processes may enqueue the same event; it is written once).
- **A claim** is a compare-and-set, the same statement on SQLite and Postgres: ``UPDATE … SET
  lease_owner = me, lease_until = now + lease WHERE id = ? AND status = 'pending' AND
  next_attempt_at <= now AND (lease_until IS NULL OR lease_until < now)``; the process whose
  update changed the row sends it (on Postgres a second updater waits for the first's commit
  and then finds the lease taken; on SQLite writers are serialized by ``BEGIN IMMEDIATE``). An
  outcome is recorded only by the lease's owner. A process that dies mid-send leaves a lease
  that ends after ``lease`` seconds, when another process may send it again (at least once).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from sqlalchemy import Engine, Row, or_, select, update

from baton.store._gates import _COLUMNS as GATE_COLUMNS
from baton.store._gates import _from_row as gate_from_row
from baton.store._locked import RECORD_COLUMNS, run_record
from baton.store._rundata import _insert_once
from baton.store.engine import READ_ONLY
from baton.store.records import GateRecord, RunRecord
from baton.store.storage_errors import in_thread
from baton.store.store import Store
from baton.store.tables import gates, runs, webhook_cursor, webhook_deliveries

__all__ = ["DECIDED_GATE_STATUSES", "ENDED_RUN_STATUSES", "Deliveries", "DeliveryRecord", "Outcome"]

DECIDED_GATE_STATUSES: Final = ("approved", "denied", "answered", "expired")
ENDED_RUN_STATUSES: Final = ("finished", "failed")
Outcome = Literal["delivered", "retry", "failed"]
_COLUMNS: Final = list(webhook_deliveries.c)


@dataclass(frozen=True)
class DeliveryRecord:
    """One row of ``webhook_deliveries``."""

    id: int
    url: str
    event_key: str
    event: str
    run_id: str
    data: dict[str, Any]
    status: str  # pending, delivered, failed
    attempts: int
    created_at: str
    next_attempt_at: str
    give_up_at: str
    lease_owner: str | None
    lease_until: str | None
    delivered_at: str | None
    last_error: str | None


class Deliveries:
    """The webhook rows of one store (every method runs in a worker thread)."""

    def __init__(self, store: Store) -> None:
        self._engine = store.engine

    # Events.

    async def gates_opened(self, after: str) -> list[GateRecord]:
        """Gates created after ``after``, oldest first."""
        return await in_thread(_gates_where, self._engine, gates.c.created_at > after, gates.c.created_at)

    async def gates_decided(self, after: str) -> list[GateRecord]:
        """Gates decided (not superseded) after ``after``, oldest decision first."""
        where = (gates.c.decided_at > after) & gates.c.status.in_(DECIDED_GATE_STATUSES)
        return await in_thread(_gates_where, self._engine, where, gates.c.decided_at)

    async def runs_ended(self, after: str) -> list[RunRecord]:
        """Runs that finished or failed after ``after``, oldest end first."""
        return await in_thread(_runs_ended, self._engine, after)

    async def cursor(self, name: str, start: str) -> str:
        """How far events were read (``start`` the first time: it is recorded then)."""
        return await in_thread(_cursor, self._engine, name, start)

    async def advance(self, name: str, position: str) -> None:
        """Move the cursor forward to ``position`` (never back)."""
        await in_thread(_advance, self._engine, name, position)

    # Deliveries.

    async def enqueue(self, rows: Sequence[Mapping[str, Any]]) -> int:
        """Insert deliveries (``url, event_key, event, run_id, data, created_at, next_attempt_at,
        give_up_at``) as pending; one already there is kept. The number inserted."""
        return await in_thread(_enqueue, self._engine, list(rows))

    async def claim(
        self, urls: Iterable[str], owner: str, now: str, lease_until: str, limit: int
    ) -> list[DeliveryRecord]:
        """Claim up to ``limit`` pending deliveries to ``urls`` that are due at ``now``, oldest first;
        each is counted as an attempt. A delivery another process holds is left alone."""
        return await in_thread(_claim, self._engine, list(urls), owner, now, lease_until, limit)

    async def record(
        self, delivery_id: int, owner: str, outcome: Outcome, *, at: str, next_attempt_at: str | None = None,
        error: str | None = None,
    ) -> bool:  # fmt: skip
        """Record an attempt's outcome and end the lease; False when ``owner`` no longer holds it."""
        return await in_thread(_record, self._engine, delivery_id, owner, outcome, at, next_attempt_at, error)

    async def list(self, run_id: str | None = None) -> list[DeliveryRecord]:
        """Deliveries in the order they were enqueued (of one run with ``run_id``)."""
        return await in_thread(_list, self._engine, run_id)


def _gates_where(engine: Engine, where: Any, order: Any) -> list[GateRecord]:
    query = (
        select(*GATE_COLUMNS, runs.c.id.label("run_id"))
        .join(runs, runs.c.run_key == gates.c.run_key)
        .where(where)
        .order_by(order, gates.c.id)
    )
    with engine.connect().execution_options(**READ_ONLY) as connection:
        rows: list[Row[Any]] = list(connection.execute(query))
    return [gate_from_row(row) for row in rows]


def _runs_ended(engine: Engine, after: str) -> list[RunRecord]:
    query = (
        select(*RECORD_COLUMNS)
        .where(runs.c.finished_at > after, runs.c.status.in_(ENDED_RUN_STATUSES))
        .order_by(runs.c.finished_at, runs.c.run_key)
    )
    with engine.connect().execution_options(**READ_ONLY) as connection:
        return [run_record(row) for row in connection.execute(query)]


def _cursor(engine: Engine, name: str, start: str) -> str:
    with engine.connect().execution_options(**READ_ONLY) as connection:
        found = connection.execute(select(webhook_cursor.c.position).where(webhook_cursor.c.name == name)).scalar()
    if found is not None:
        return str(found)
    with engine.begin() as connection:
        connection.execute(_insert_once(connection, webhook_cursor).values(name=name, position=start))
        return str(
            connection.execute(select(webhook_cursor.c.position).where(webhook_cursor.c.name == name)).scalar_one()
        )


def _advance(engine: Engine, name: str, position: str) -> None:
    with engine.begin() as connection:
        connection.execute(
            update(webhook_cursor)
            .where(webhook_cursor.c.name == name, webhook_cursor.c.position < position)
            .values(position=position)
        )


def _enqueue(engine: Engine, rows: list[Mapping[str, Any]]) -> int:
    if not rows:
        return 0
    values = [{**row, "status": "pending", "attempts": 0} for row in rows]
    inserted = 0
    with engine.begin() as connection:
        statement = _insert_once(connection, webhook_deliveries).returning(webhook_deliveries.c.id)
        for row in values:  # one by one: RETURNING tells which were new
            inserted += len(connection.execute(statement.values(**row)).all())
    return inserted


def _claim(engine: Engine, urls: list[str], owner: str, now: str, lease_until: str, limit: int) -> list[DeliveryRecord]:
    if not urls or limit < 1:
        return []
    columns = webhook_deliveries.c
    free = or_(columns.lease_until.is_(None), columns.lease_until < now)
    due = (columns.status == "pending") & (columns.next_attempt_at <= now) & free
    # Looked for without the write lock; the UPDATE checks again, so of two claimers one wins.
    with engine.connect().execution_options(**READ_ONLY) as connection:
        query = select(columns.id).where(due, columns.url.in_(urls)).order_by(columns.next_attempt_at, columns.id)
        candidates = connection.execute(query.limit(limit)).scalars().all()
    if not candidates:
        return []
    claimed = []
    with engine.begin() as connection:
        for delivery_id in candidates:
            row = connection.execute(
                update(webhook_deliveries)
                .where(columns.id == delivery_id, due)
                .values(lease_owner=owner, lease_until=lease_until, attempts=columns.attempts + 1)
                .returning(*_COLUMNS)
            ).one_or_none()
            if row is not None:
                claimed.append(_delivery(row))
    return claimed


def _record(
    engine: Engine, delivery_id: int, owner: str, outcome: Outcome, at: str, next_attempt_at: str | None,
    error: str | None,
) -> bool:  # fmt: skip
    columns = webhook_deliveries.c
    values: dict[str, Any] = {"lease_owner": None, "lease_until": None, "last_error": error}
    if outcome == "delivered":
        values.update(status="delivered", delivered_at=at)
    elif outcome == "failed":
        values.update(status="failed")
    else:
        values.update(next_attempt_at=next_attempt_at or at)
    with engine.begin() as connection:
        changed = connection.execute(
            update(webhook_deliveries)
            .where(columns.id == delivery_id, columns.lease_owner == owner, columns.status == "pending")
            .values(**values)
        ).rowcount
    return bool(changed)


def _list(engine: Engine, run_id: str | None) -> list[DeliveryRecord]:
    query = select(*_COLUMNS).order_by(webhook_deliveries.c.id)
    if run_id is not None:
        query = query.where(webhook_deliveries.c.run_id == run_id)
    with engine.connect().execution_options(**READ_ONLY) as connection:
        return [_delivery(row) for row in connection.execute(query)]


def _delivery(row: Row[Any]) -> DeliveryRecord:
    return DeliveryRecord(**row._asdict())
