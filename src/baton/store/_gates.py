"""The ``gates`` table's reads and writes (blocking; :class:`~baton.store.store.Store` runs them in a thread).

A decision and the inbox command that wakes its run commit in one transaction (the wake is an
inbox row of kind ``gate_decision``: :data:`DECISION_INBOX_KIND`), so a run never misses one.
The rules of deciding (which bodies, which kinds, what is refused) are
:class:`baton.gates.ledger.GateLedger`'s; this module only reads and writes rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sqlalchemy import Engine, Row, insert, select, update
from sqlalchemy.engine import Connection

from baton.errors import GateError, NotFoundError
from baton.events.entry import utc_timestamp
from baton.store._rundata import inbox_insert, run_key_of
from baton.store.engine import READ_ONLY
from baton.store.records import DECISION_INBOX_KIND, GateRecord
from baton.store.tables import gates, runs

__all__ = [
    "decide",
    "deny_pending",
    "expire_due",
    "get_gate",
    "list_gates",
    "mark_used",
    "open_gate",
    "run_agent",
]

_COLUMNS: Final = [column for column in gates.c if column.name != "run_key"]


def open_gate(
    engine: Engine, run_id: str, values: dict[str, Any], keep: tuple[str, ...] = ()
) -> tuple[GateRecord, list[GateRecord]]:
    with engine.begin() as connection:
        run_key = run_key_of(connection, run_id)
        supersede = {"decision": "supersede", "reason": "superseded", "superseded_by": values["id"]}
        superseded = connection.execute(
            update(gates)
            .where(
                gates.c.run_key == run_key,
                gates.c.kind == values["kind"],
                gates.c.status == "pending",
                gates.c.bound_input_hash.is_distinct_from(values["bound_input_hash"]),
                gates.c.id.not_in(keep),
            )
            .values(status="superseded", decision=supersede, decided_by="baton", decided_at=values["created_at"])
            .returning(*_COLUMNS)
        ).all()
        connection.execute(insert(gates).values(run_key=run_key, **values))
    gate = _record({**values, "decision": None, "decided_by": None, "decided_at": None}, run_id)
    return gate, sorted((_record(row._asdict(), run_id) for row in superseded), key=lambda g: g.id)


def get_gate(engine: Engine, gate_id: str) -> GateRecord:
    with engine.connect().execution_options(**READ_ONLY) as connection:
        row = connection.execute(_query().where(gates.c.id == gate_id)).one_or_none()
    if row is None:
        raise NotFoundError("gate_not_found", f"no gate {gate_id}")
    return _from_row(row)


def run_agent(engine: Engine, run_id: str) -> str:
    with engine.connect().execution_options(**READ_ONLY) as connection:
        run_key_of(connection, run_id)
        return str(connection.execute(select(runs.c.agent).where(runs.c.id == run_id)).scalar_one())


def list_gates(engine: Engine, run_id: str | None, status: str | None, owner: str | None) -> list[GateRecord]:
    query = _query().order_by(gates.c.created_at, gates.c.id)
    if run_id is not None:
        query = query.where(runs.c.id == run_id)
    if status is not None:
        query = query.where(gates.c.status == status)
    if owner is not None:
        query = query.where(runs.c.owner == owner)
    with engine.connect().execution_options(**READ_ONLY) as connection:
        found = [_from_row(row) for row in connection.execute(query)]
        if run_id is not None and not found:
            run_key_of(connection, run_id)  # no gates, or no such run: run_not_found
        return found


def decide(
    engine: Engine, gate: GateRecord, status: str, decision: dict[str, Any], decided_by: str
) -> GateRecord | None:
    """Record the decision on a pending gate and wake its run, in one transaction; None when the
    gate is not pending (an overdue one is expired first: a timeout is never an approval)."""
    now = utc_timestamp()
    overdue = gate.expires_at is not None and gate.expires_at <= now
    with engine.begin() as connection:
        if overdue:
            _expire(connection, run_key_of(connection, gate.run_id), gate.run_id, gate.id, now)
        row = connection.execute(
            update(gates)
            .where(gates.c.id == gate.id, gates.c.status == "pending")
            .values(status=status, decision=decision, decided_by=decided_by, decided_at=now)
            .returning(gates.c.run_key, *_COLUMNS)
        ).one_or_none()
        if row is not None:
            _wake(connection, row.run_key, gate.run_id, gate.id)
    return None if row is None else _record(row._asdict(), gate.run_id)


def expire_due(engine: Engine, run_id: str | None, now: str) -> list[GateRecord]:
    """Deny every pending gate past its ``expires_at`` (``expired``, reason ``timeout``) and wake its run."""
    query = (
        select(gates.c.id, gates.c.run_key, runs.c.id.label("run_id"))
        .join(runs, runs.c.run_key == gates.c.run_key)
        .where(gates.c.status == "pending", gates.c.expires_at.is_not(None), gates.c.expires_at <= now)
    )
    if run_id is not None:
        query = query.where(runs.c.id == run_id)
    # Looked for without the write lock (listing gates calls this every time); the UPDATE
    # re-checks "pending", so a gate decided in between stays decided.
    with engine.connect().execution_options(**READ_ONLY) as connection:
        due = connection.execute(query).all()
    if not due:
        return []
    expired = []
    with engine.begin() as connection:
        for row in due:
            if _expire(connection, row.run_key, row.run_id, row.id, now):
                expired.append(row.id)
    return [get_gate(engine, gate_id) for gate_id in expired]


def deny_all(engine: Engine, run_id: str, decision: dict[str, Any], decided_by: str) -> list[GateRecord]:
    with engine.begin() as connection:
        return deny_pending(connection, run_key_of(connection, run_id), run_id, decision, decided_by)


def deny_pending(
    connection: Connection, run_key: int, run_id: str, decision: dict[str, Any], decided_by: str
) -> list[GateRecord]:
    """Deny every pending gate of the run in the caller's transaction (and wake the run); the gates denied."""
    now = utc_timestamp()
    denied = connection.execute(
        update(gates)
        .where(gates.c.run_key == run_key, gates.c.status == "pending")
        .values(status="denied", decision=decision, decided_by=decided_by, decided_at=now)
        .returning(*_COLUMNS)
    ).all()
    for row in denied:
        _wake(connection, run_key, run_id, row.id)
    return sorted((_record(row._asdict(), run_id) for row in denied), key=lambda g: g.id)


def mark_used(engine: Engine, gate_id: str, call_id: str) -> None:
    with engine.begin() as connection:
        row = connection.execute(
            select(gates.c.status, gates.c.decision).where(gates.c.id == gate_id).with_for_update()
        ).one_or_none()
        if row is None:
            raise NotFoundError("gate_not_found", f"no gate {gate_id}")
        decision = dict(row.decision or {})
        if row.status != "approved":
            raise GateError("gate_not_pending", f"{gate_id} is {row.status}, not approved")
        used = decision.get("used_by_call_id")
        if used == call_id:
            return
        if used is not None:
            raise GateError(
                "gate_not_pending",
                f"the approval {gate_id} was used by the call {used} already",
                details={"gate_id": gate_id, "used_by_call_id": used},
            )
        decision["used_by_call_id"] = call_id
        connection.execute(update(gates).where(gates.c.id == gate_id).values(decision=decision))


def _expire(connection: Connection, run_key: int, run_id: str, gate_id: str, now: str) -> bool:
    denial = {"decision": "deny", "reason": "timeout", "interrupt": False}
    changed = connection.execute(
        update(gates)
        .where(gates.c.id == gate_id, gates.c.status == "pending")
        .values(status="expired", decision=denial, decided_by="timeout", decided_at=now)
    ).rowcount
    if changed:
        _wake(connection, run_key, run_id, gate_id)
    return bool(changed)


def _wake(connection: Connection, run_key: int, run_id: str, gate_id: str) -> None:
    """The inbox command that tells the run's executor (any process) a gate was decided."""
    inbox_insert(connection, run_key, run_id, DECISION_INBOX_KIND, {"gate_id": gate_id})


def _query() -> Any:
    return select(*_COLUMNS, runs.c.id.label("run_id")).join(runs, runs.c.run_key == gates.c.run_key)


def _from_row(row: Row[Any]) -> GateRecord:
    values = row._asdict()
    return _record(values, values.pop("run_id"))


def _record(values: Mapping[str, Any], run_id: str) -> GateRecord:
    fields: dict[str, Any] = {column.name: values.get(column.name) for column in _COLUMNS}
    fields["summary"] = fields["summary"] or ""
    return GateRecord(run_id=run_id, **fields)
