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

import builtins
from collections.abc import Collection, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from baton.errors import GateError, NotFoundError, UsageError
from baton.events.entry import utc_timestamp
from baton.gates import remember
from baton.gates.decisions import (
    AGENTS_APPLYING_EDITS,
    EDIT_FIELDS,
    GATE_KINDS,
    GateKind,
    check_decision,
    refuse_edit,
    same_decision,
)
from baton.store.records import DECISION_INBOX_KIND, GATE_STATUSES, GateRecord, GateStatus, new_gate_id
from baton.store.store import Store

__all__ = [
    "DECISION_INBOX_KIND",
    "GATE_STATUSES",
    "GateKind",
    "GateLedger",
    "GateRecord",
    "GateStatus",
    "cancel_denial",
    "suggested_rule",
]

_RESOLVED_STATUS: Final[dict[str, GateStatus]] = {
    "approve": "approved",
    "continue": "approved",
    "edit": "approved",
    "answer": "answered",
    "deny": "denied",
    "reject": "denied",
}


class GateLedger:
    """Opens, lists and decides gates in a :class:`Store` (every method is async)."""

    def __init__(self, store: Store) -> None:
        self._store = store

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
        keep: Collection[str] = (),
    ) -> tuple[GateRecord, builtins.list[GateRecord]]:
        """Store a pending gate; the run's pending gates of this kind bound to another input are
        superseded (returned second), except those in ``keep``: gates whose request still waits
        (an agent may ask about several calls at once). Announce the gate only after this returns."""
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
        return await self._store.open_gate(run_id, values, keep=tuple(keep))

    async def get(self, gate_id: str) -> GateRecord:
        """The gate, or ``gate_not_found``."""
        return await self._store.get_gate(gate_id)

    async def list(
        self, *, run_id: str | None = None, status: str | None = None, owner: str | None = None
    ) -> builtins.list[GateRecord]:
        """Gates oldest first, filtered by run (``run_not_found`` for a run there is not), status and
        the owner of their run."""
        if status is not None and status not in GATE_STATUSES:
            raise UsageError("invalid_argument", f"status: one of {sorted(GATE_STATUSES)}", details={"field": "status"})
        return await self._store.list_gates(run_id=run_id, status=status, owner=owner)

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
            agent = await self._store.run_agent(gate.run_id)
            refuse_edit(gate, decision, agent=agent, applies_edits=agent in AGENTS_APPLYING_EDITS)
        status = _RESOLVED_STATUS[decision["decision"]]
        decided = await self._store.decide_gate(gate, status, decision, decided_by)
        if decided is not None:
            return decided
        recorded = await self.get(gate.id)
        if recorded.status == status and same_decision(recorded.decision, decision):
            return recorded
        raise GateError(
            "gate_not_pending",
            f"{gate.id} is {recorded.status}" + (f" ({recorded.decided_by})" if recorded.decided_by else ""),
            details={"gate_id": gate.id, "status": recorded.status, "decision": recorded.decision},
        )

    async def expire_due(self, run_id: str | None = None, now: datetime | None = None) -> builtins.list[GateRecord]:
        """Deny every pending gate past its ``expires_at`` (reason ``timeout``) and wake its run."""
        moment = utc_timestamp(now)
        return await self._store.expire_due_gates(run_id, moment)

    async def deny_all_pending(self, run_id: str, *, reason: str, decided_by: str) -> builtins.list[GateRecord]:
        """Deny every pending gate of the run with ``interrupt: true`` (a cancel)."""
        return await self._store.deny_pending_gates(run_id, cancel_denial(reason), decided_by)

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
        await self._store.mark_gate_used(gate_id, call_id)


def cancel_denial(reason: str = "cancelled") -> dict[str, Any]:
    """The decision a cancel records on every pending gate of its run."""
    return {"decision": "deny", "reason": reason, "interrupt": True}


def suggested_rule(gate: GateRecord) -> str | None:
    """The rule approving ``gate`` with ``remember: "session"`` would store (None: remember is refused)."""
    return remember.suggested_rule(gate.tool_name, gate.input) if gate.kind == "tool" else None
