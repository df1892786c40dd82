"""The gate ledger: every gate a run opened, and the one decision each received.

A gate is a row of ``gates`` (docs/design.md "Gates, precisely"). It is stored before it is
announced, it never changes once decided, and a decision is recorded by one ``UPDATE … WHERE
status = 'pending'`` in the same transaction as the inbox command (kind ``gate_decision``,
payload ``{"gate_id"}``) that wakes whichever process executes the run — so of two decisions
arriving at once from anywhere exactly one is recorded, and the other is either the same
decision (returned as recorded: a safe retry) or refused with ``gate_not_pending``.

Statuses: ``pending`` → ``approved`` | ``denied`` | ``answered`` (a human, or a cancel),
``expired`` (nobody decided before ``expires_at``: recorded as a denial with reason
``timeout``, ``decided_by: "timeout"``), ``superseded`` (the run proposed the same kind of
call again with another input: ``decision = {"decision": "supersede", "reason":
"superseded", "superseded_by"}``, ``decided_by: "baton"``).
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from sqlalchemy import Engine, Row, insert, select, update
from sqlalchemy.engine import Connection

from baton.errors import GateError, NotFoundError, UsageError
from baton.events.entry import utc_timestamp
from baton.gates import remember
from baton.gates.decisions import EDIT_FIELDS, GATE_KINDS, GateKind, check_decision, refuse_edit, same_decision
from baton.store._rundata import inbox_insert, run_key_of
from baton.store.engine import READ_ONLY
from baton.store.records import GATE_STATUSES, GateRecord, GateStatus, new_gate_id
from baton.store.store import Store
from baton.store.tables import gates, runs

__all__ = [
    "DECISION_INBOX_KIND",
    "GATE_STATUSES",
    "GateKind",
    "GateLedger",
    "GateRecord",
    "GateStatus",
    "cancel_denial",
    "deny_pending",
    "suggested_rule",
]

DECISION_INBOX_KIND: Final = "gate_decision"

_RESOLVED_STATUS: Final[dict[str, GateStatus]] = {
    "approve": "approved",
    "continue": "approved",
    "edit": "approved",
    "answer": "answered",
    "deny": "denied",
    "reject": "denied",
}
_COLUMNS: Final = [column for column in gates.c if column.name != "run_key"]


class GateLedger:
    """Opens, lists and decides gates in a :class:`Store` (every method is async)."""

    def __init__(self, store: Store) -> None:
        self._engine: Engine = store.engine

    async def open(
        self,
        run_id: str,
        kind: GateKind,
        *,
        summary: str,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
        bound_call_id: str | None = None,
        bound_input_hash: str | None = None,
        input: Mapping[str, Any] | None = None,
        questions: builtins.list[Any] | None = None,
        plan: str | None = None,
        expires_in_seconds: float | None = None,
    ) -> tuple[GateRecord, builtins.list[GateRecord]]:
        """Store a pending gate; the run's pending gates of this kind bound to another input are
        superseded (returned second). Announce the gate only after this returns."""
        if kind not in GATE_KINDS:
            raise UsageError("invalid_argument", f"a gate's kind is one of {sorted(GATE_KINDS)}, not {kind!r}")
        now = datetime.now(UTC)
        expires = None if expires_in_seconds is None else now + timedelta(seconds=expires_in_seconds)
        values: dict[str, Any] = {
            "id": new_gate_id(),
            "kind": kind,
            "status": "pending",
            "tool_name": tool_name,
            "tool_call_id": tool_call_id,
            "bound_call_id": bound_call_id,
            "bound_input_hash": bound_input_hash,
            "input": dict(input) if input is not None else None,
            "questions": list(questions) if questions is not None else None,
            "plan": plan,
            "summary": summary,
            "created_at": utc_timestamp(now),
            "expires_at": None if expires is None else utc_timestamp(expires),
        }
        return await asyncio.to_thread(self._open, run_id, values)

    async def get(self, gate_id: str) -> GateRecord:
        """The gate, or ``gate_not_found``."""
        return await asyncio.to_thread(self._get, gate_id)

    async def list(
        self, *, run_id: str | None = None, status: str | None = None, owner: str | None = None
    ) -> builtins.list[GateRecord]:
        """Gates oldest first, filtered by run (``run_not_found`` for a run there is not), status and
        the owner of their run."""
        if status is not None and status not in GATE_STATUSES:
            raise UsageError("invalid_argument", f"status: one of {sorted(GATE_STATUSES)}", details={"field": "status"})
        return await asyncio.to_thread(self._list, run_id, status, owner)

    async def pending_one(self, run_id: str, kind: GateKind | None = None) -> GateRecord:
        """The run's one pending gate (of ``kind``): ``gate_not_found`` when none, ``gate_ambiguous``
        when several."""
        pending = [g for g in await self.list(run_id=run_id, status="pending") if kind is None or g.kind == kind]
        what = f"{kind} gate" if kind else "gate"
        if not pending:
            raise NotFoundError("gate_not_found", f"run {run_id} has no pending {what}")
        if len(pending) > 1:
            raise GateError(
                "gate_ambiguous",
                f"run {run_id} has {len(pending)} pending {what}s: name one",
                details={"gate_ids": [g.id for g in pending]},
            )
        return pending[0]

    async def decide(
        self, gate_id: str, body: Mapping[str, Any], *, decided_by: str, kind: GateKind | None = None
    ) -> GateRecord:
        """Record a decision (see :mod:`baton.gates.decisions` for the bodies) and wake the run.

        ``kind`` is the kind of gate the caller meant (an HTTP endpoint, an API method):
        another kind is ``gate_kind_mismatch`` (``gate_not_resumable`` for ``continue``).
        The same decision again returns the recorded gate; another one on a decided gate is
        ``gate_not_pending`` with the recorded decision in ``details``. An edit the run's agent
        (as stored) cannot apply is ``edit_not_supported``, and nothing is recorded.
        """
        gate = await self.get(gate_id)
        decision = check_decision(gate, body, kind)
        if any(name in decision for name in EDIT_FIELDS):
            agent = await asyncio.to_thread(self._agent_of, gate.run_id)
            refuse_edit(gate, decision, agent=agent, applies_edits=_applies_edits(agent))
        return await asyncio.to_thread(self._decide, gate, decision, decided_by)

    async def expire_due(self, run_id: str | None = None, now: datetime | None = None) -> builtins.list[GateRecord]:
        """Deny every pending gate past its ``expires_at`` (reason ``timeout``) and wake its run."""
        moment = utc_timestamp(now)
        return await asyncio.to_thread(self._expire_due, run_id, moment)

    async def deny_all_pending(self, run_id: str, *, reason: str, decided_by: str) -> builtins.list[GateRecord]:
        """Deny every pending gate of the run with ``interrupt: true`` (a cancel)."""
        return await asyncio.to_thread(self._deny_all, run_id, cancel_denial(reason), decided_by)

    async def approved_for(self, run_id: str, bound_input_hash: str) -> GateRecord | None:
        """An approved tool gate of the run bound to that input and not yet used by a call."""
        found = await self.list(run_id=run_id, status="approved")
        for gate in found:
            used = (gate.decision or {}).get("used_by_call_id")
            if gate.kind == "tool" and gate.bound_input_hash == bound_input_hash and used is None:
                return gate
        return None

    async def mark_used(self, gate_id: str, call_id: str) -> None:
        """Record that the call ``call_id`` ran on this approval (``decision.used_by_call_id``)."""
        await asyncio.to_thread(self._mark_used, gate_id, call_id)

    # Blocking halves.

    def _open(self, run_id: str, values: dict[str, Any]) -> tuple[GateRecord, builtins.list[GateRecord]]:
        with self._engine.begin() as connection:
            run_key = run_key_of(connection, run_id)
            supersede = {"decision": "supersede", "reason": "superseded", "superseded_by": values["id"]}
            superseded = connection.execute(
                update(gates)
                .where(
                    gates.c.run_key == run_key,
                    gates.c.kind == values["kind"],
                    gates.c.status == "pending",
                    gates.c.bound_input_hash.is_distinct_from(values["bound_input_hash"]),
                )
                .values(status="superseded", decision=supersede, decided_by="baton", decided_at=values["created_at"])
                .returning(*_COLUMNS)
            ).all()
            connection.execute(insert(gates).values(run_key=run_key, **values))
        gate = _record({**values, "decision": None, "decided_by": None, "decided_at": None}, run_id)
        return gate, sorted((_record(row._asdict(), run_id) for row in superseded), key=lambda g: g.id)

    def _get(self, gate_id: str) -> GateRecord:
        with self._engine.connect().execution_options(**READ_ONLY) as connection:
            row = connection.execute(_query().where(gates.c.id == gate_id)).one_or_none()
        if row is None:
            raise NotFoundError("gate_not_found", f"no gate {gate_id}")
        return _from_row(row)

    def _agent_of(self, run_id: str) -> str:
        with self._engine.connect().execution_options(**READ_ONLY) as connection:
            return str(connection.execute(select(runs.c.agent).where(runs.c.id == run_id)).scalar_one())

    def _list(self, run_id: str | None, status: str | None, owner: str | None) -> builtins.list[GateRecord]:
        query = _query().order_by(gates.c.created_at, gates.c.id)
        if run_id is not None:
            query = query.where(runs.c.id == run_id)
        if status is not None:
            query = query.where(gates.c.status == status)
        if owner is not None:
            query = query.where(runs.c.owner == owner)
        with self._engine.connect().execution_options(**READ_ONLY) as connection:
            found = [_from_row(row) for row in connection.execute(query)]
            if run_id is not None and not found:
                run_key_of(connection, run_id)  # no gates, or no such run: run_not_found
            return found

    def _decide(self, gate: GateRecord, decision: dict[str, Any], decided_by: str) -> GateRecord:
        now = utc_timestamp()
        status = _RESOLVED_STATUS[decision["decision"]]
        overdue = gate.expires_at is not None and gate.expires_at <= now
        with self._engine.begin() as connection:
            if overdue:  # a timeout is never an approval: an overdue gate is expired first
                self._expire(connection, run_key_of(connection, gate.run_id), gate.run_id, gate.id, now)
            row = connection.execute(
                update(gates)
                .where(gates.c.id == gate.id, gates.c.status == "pending")
                .values(status=status, decision=decision, decided_by=decided_by, decided_at=now)
                .returning(gates.c.run_key, *_COLUMNS)
            ).one_or_none()
            if row is not None:
                _wake(connection, row.run_key, gate.run_id, gate.id)
        if row is not None:
            return _record(row._asdict(), gate.run_id)
        recorded = self._get(gate.id)
        if recorded.status == status and same_decision(recorded.decision, decision):
            return recorded
        raise GateError(
            "gate_not_pending",
            f"{gate.id} is {recorded.status}" + (f" ({recorded.decided_by})" if recorded.decided_by else ""),
            details={"gate_id": gate.id, "status": recorded.status, "decision": recorded.decision},
        )

    def _expire(self, connection: Connection, run_key: int, run_id: str, gate_id: str, now: str) -> bool:
        denial = {"decision": "deny", "reason": "timeout", "interrupt": False}
        changed = connection.execute(
            update(gates)
            .where(gates.c.id == gate_id, gates.c.status == "pending")
            .values(status="expired", decision=denial, decided_by="timeout", decided_at=now)
        ).rowcount
        if changed:
            _wake(connection, run_key, run_id, gate_id)
        return bool(changed)

    def _expire_due(self, run_id: str | None, now: str) -> builtins.list[GateRecord]:
        query = (
            select(gates.c.id, gates.c.run_key, runs.c.id.label("run_id"))
            .join(runs, runs.c.run_key == gates.c.run_key)
            .where(gates.c.status == "pending", gates.c.expires_at.is_not(None), gates.c.expires_at <= now)
        )
        if run_id is not None:
            query = query.where(runs.c.id == run_id)
        # Looked for without the write lock (listing gates calls this every time); the UPDATE
        # re-checks "pending", so a gate decided in between stays decided.
        with self._engine.connect().execution_options(**READ_ONLY) as connection:
            due = connection.execute(query).all()
        if not due:
            return []
        expired = []
        with self._engine.begin() as connection:
            for row in due:
                if self._expire(connection, row.run_key, row.run_id, row.id, now):
                    expired.append(row.id)
        return [self._get(gate_id) for gate_id in expired]

    def _deny_all(self, run_id: str, decision: dict[str, Any], decided_by: str) -> builtins.list[GateRecord]:
        with self._engine.begin() as connection:
            return deny_pending(connection, run_key_of(connection, run_id), run_id, decision, decided_by)

    def _mark_used(self, gate_id: str, call_id: str) -> None:
        with self._engine.begin() as connection:
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


def cancel_denial(reason: str = "cancelled") -> dict[str, Any]:
    """The decision a cancel records on every pending gate of its run."""
    return {"decision": "deny", "reason": reason, "interrupt": True}


def suggested_rule(gate: GateRecord) -> str | None:
    """The rule approving ``gate`` with ``remember: "session"`` would store (None: remember is refused)."""
    return remember.suggested_rule(gate.tool_name, gate.input) if gate.kind == "tool" else None


def deny_pending(
    connection: Connection, run_key: int, run_id: str, decision: dict[str, Any], decided_by: str
) -> builtins.list[GateRecord]:
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


def _applies_edits(agent: str) -> bool:
    # The registry's answer; imported here, for an edit only: importing the registry starts the
    # agents' modules (about a second), which no other decision needs.
    from baton.agents.registry import applies_edits

    return applies_edits(agent)


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
