"""A run's budget while it executes (baton.gates.budget): what it spent, the ``resource_limit`` gate
when a turn reaches the budget, and the ``continue`` decisions that raise it.

The executor calls :meth:`RunBudget.start` before the first turn and :meth:`RunBudget.after_turn` after each one;
during a turn it watches :meth:`RunBudget.seconds_left` and stops the turn when a seconds budget
runs out (the time a gate waits for a human does not count). A reached budget opens a
``resource_limit`` gate (stored before ``_baton/gate_opened`` is logged, the run ``paused`` on it)
and the run **parks** at once: its turn is over, and Claude, stopped by ``max_budget_usd``,
answers nothing more in that process. Whoever continues the parked run (``baton run`` waiting,
``baton resume``, a worker) calls :func:`continue_budget` first: the decided gate's new budget
goes on the run's record and the gate is marked used (``used_by_call_id: "budget"``), so the
continuation prompt does not name it as a call; the resumed execution logs its
``_baton/gate_resolved``. A ``resource_limit`` gate that was denied instead (``baton deny``, its
expiry) ends the run when it is resumed: failed with ``budget_exhausted``, before another turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from baton.gates.budget import Budget, LimitReached, Spend, check_budget, continued_budget, spend_from_log
from baton.gates.ledger import GateLedger, GateRecord
from baton.runs.lifecycle import RunLifecycle
from baton.store import Store
from baton.store.records import RunRecord

__all__ = ["CONTINUE_MARK", "RunBudget", "budget_of", "continue_budget"]

CONTINUE_MARK: Final = "budget"  # ``used_by_call_id`` of a resource_limit gate whose budget is applied

Note = Callable[[str, Any], object]


def budget_of(record: RunRecord) -> Budget:
    return Budget(record.budget_usd, record.budget_turns, record.budget_seconds)


async def continue_budget(store: Store, run_id: str) -> Budget:
    """Apply the run's ``continue`` decisions not applied yet (oldest first) to its record; the
    budget the run goes on with."""
    record = await store.get_run(run_id)
    budget = budget_of(record)
    ledger = GateLedger(store)
    for gate in await _continued(ledger, run_id):
        budget = continued_budget(budget, gate.decision)
        await store.update_run(run_id, budget_usd=budget.usd, budget_turns=budget.turns, budget_seconds=budget.seconds)
        await ledger.mark_used(gate.id, CONTINUE_MARK)
    return budget


class RunBudget:
    """The budget of one execution of a run."""

    def __init__(
        self, store: Store, lifecycle: RunLifecycle, run_id: str, budget: Budget, note: Note, *, expiry_seconds: float
    ) -> None:
        self._store = store
        self._lifecycle = lifecycle
        self._run_id = run_id
        self._note = note
        self._expiry = expiry_seconds
        self.budget = budget
        self.spend = Spend()
        self.stopped: GateRecord | None = None  # a resource_limit gate denied (or expired): the run ends
        self._turn_started: float | None = None

    async def start(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Count what the run spent before (its log so far), and log the resolution of the
        ``continue`` decisions applied for this execution (:func:`continue_budget`)."""
        self.spend = spend_from_log(entries)
        logged = {
            (entry.get("payload") or {}).get("params", {}).get("gate_id")
            for entry in entries
            if entry.get("method") == "_baton/gate_resolved"
        }
        ledger = GateLedger(self._store)
        for gate in await ledger.list(run_id=self._run_id):
            if gate.kind != "resource_limit" or gate.id in logged:
                continue
            decision = gate.decision or {}
            resolved = {
                "gate_id": gate.id,
                "decision": decision.get("decision") or gate.status,
                "reason": decision.get("reason"),
                "decided_by": gate.decided_by,
            }
            if decision.get("used_by_call_id") == CONTINUE_MARK:
                self._note("gate_resolved", {**resolved, "budget": self.budget.to_json()})
            elif gate.status in ("denied", "expired"):  # denied, cancelled or timed out: no more budget
                self._note("gate_resolved", resolved)
                self.stopped = gate

    def turn_started(self) -> None:
        self._turn_started = time.monotonic()

    def seconds_left(self, gate_wait: float) -> float | None:
        """What is left of a seconds budget in the turn going on, ``gate_wait`` (the seconds it
        waited for humans so far) not counted; ``None`` without a seconds budget."""
        if self.budget.seconds is None or self._turn_started is None:
            return None
        working = time.monotonic() - self._turn_started - gate_wait
        return self.budget.seconds - self.spend.seconds - working

    async def after_turn(
        self,
        usage: Mapping[str, Any] | None,
        duration_ms: Any = None,
        *,
        gate_wait: float = 0.0,
        out_of_time: bool = False,
    ) -> GateRecord | None:
        """Count the turn (its time less ``gate_wait``, the seconds it waited for humans); when the
        budget is reached, or the turn was stopped at its seconds budget (``out_of_time``), open
        the ``resource_limit`` gate (the run is then ``paused`` on it) and return it."""
        measured = time.monotonic() - self._turn_started if self._turn_started is not None else 0.0
        seconds = duration_ms / 1000 if isinstance(duration_ms, int | float) and duration_ms > 0 else measured
        if out_of_time:
            seconds = max(seconds, measured)  # an interrupted agent may report less than baton measured
        self.spend.add_turn(usage, max(seconds - gate_wait, 0.0))
        self._turn_started = None
        subtype = (usage or {}).get("subtype")
        reached = check_budget(
            self.budget,
            self.spend,
            subtype=subtype if isinstance(subtype, str) else None,
            out_of_time=out_of_time,
        )
        if reached is None:
            return None
        return await self._open(reached)

    async def _open(self, reached: LimitReached) -> GateRecord:
        gate, _superseded = await GateLedger(self._store).open(
            self._run_id,
            "resource_limit",
            summary=reached.summary,
            input=reached.gate_input(),
            expires_in_seconds=self._expiry,
        )
        await self._lifecycle.pause_on_gate(
            gate.id,
            {
                "gate_id": gate.id,
                "kind": gate.kind,
                "tool_call_id": None,
                "tool_name": None,
                "bound_call_id": None,
                "bound_input_hash": None,
                "summary": gate.summary,
                "expires_at": gate.expires_at,
                "reason": "budget:" + ",".join(reached.limits),
            },
        )
        return gate


async def _continued(ledger: GateLedger, run_id: str) -> list[GateRecord]:
    gates = await ledger.list(run_id=run_id, status="approved")
    return [
        gate for gate in gates if gate.kind == "resource_limit" and (gate.decision or {}).get("used_by_call_id") is None
    ]
