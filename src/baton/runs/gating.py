"""The run's side of human gates: what the host does with a call the policy says to *ask* about.

For each such call (and every question or plan review, :mod:`baton.gates.kinds`):

1. a rule the human remembered for this run (``remember: "session"``) allows a matching tool
   call (reason ``session_rule:<rule>``); a protected path, a question or a plan never;
2. a gate decided for the same ``bound_input_hash`` and not used yet (the call re-proposed after
   the run parked, or re-evaluated by Claude after ``defer``) answers it; both call ids are logged
   (``_baton/gate_used``) and the gate is marked used;
3. otherwise a gate is opened: stored (the ledger) **before** ``_baton/gate_opened`` is logged,
   the run is ``paused`` (``status_reason`` = the gate id) while it waits up to the grace period
   for a decision from any process (:func:`baton.runs.parking.wait_for_decision`), then
   ``running`` again with ``_baton/gate_resolved`` logged. When the grace period ends first the
   run **parks** (:attr:`RunGates.parked`): the host tells Claude to ``defer`` and the executor
   stops the agent. A request the agent withdraws (``$/cancel_request``) denies its own gate
   (reason ``withdrawn``, decided by ``agent``); a cancelled turn denies every pending gate.

Any error while gating denies (reason ``gate_error``): a gate never fails open.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from baton.acp.host import GateAnswer
from baton.errors import GateError
from baton.gates import Decision, Gatekeeper, Policy, ToolCall, parse_rule
from baton.gates.kinds import GateShape, answer_for_agent
from baton.gates.ledger import GateKind, GateLedger, GateRecord
from baton.runs.lifecycle import RunLifecycle
from baton.runs.parking import wait_for_decision
from baton.store import Store

__all__ = ["RunGates"]

_log = logging.getLogger("baton.runs.gating")
WITHDRAWN_BY: Final = "agent"  # decided_by of the gate of a request its agent withdrew
WITHDRAWN_DENIAL: Final = {"decision": "deny", "reason": "withdrawn"}

Note = Callable[[str, Any], object]


class RunGates:
    """The gates of one executing run (one per execution)."""

    def __init__(
        self,
        store: Store,
        lifecycle: RunLifecycle,
        run_id: str,
        note: Note,
        gatekeeper: Gatekeeper,
        *,
        grace_seconds: float,
        expiry_seconds: float,
        on_mode: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self._store = store
        self._lifecycle = lifecycle
        self._ledger = GateLedger(store)
        self._run_id = run_id
        self._note = note
        self._gatekeeper = gatekeeper
        self._grace = grace_seconds
        self._expiry = expiry_seconds
        self._on_mode = on_mode
        self._session_rules: list[str] = []
        self._books: asyncio.Task[None] | None = None  # bookkeeping after the last decision
        self.parked: GateRecord | None = None
        self.park_event = asyncio.Event()
        self._waiting = 0  # gates waiting in-process for a human right now
        self._awaited: set[str] = set()  # gates a request still waits on (never superseded)
        self._opening = asyncio.Lock()
        self._waited = 0.0  # seconds this execution spent waiting for humans (a seconds budget skips them)
        self._wait_started = 0.0

    @property
    def waiting(self) -> bool:
        """A gate waits in-process for a human now (the clock of a seconds budget stands still)."""
        return self._waiting > 0

    def waited_seconds(self) -> float:
        """The seconds this execution has waited in-process for humans so far (a wait going on included)."""
        ongoing = time.monotonic() - self._wait_started if self._waiting else 0.0
        return self._waited + ongoing

    @property
    def session_rules(self) -> tuple[str, ...]:
        return tuple(self._session_rules)

    async def load(self) -> None:
        """The rules remembered for this run by gates decided before (a resumed run keeps them)."""
        for gate in await self._ledger.list(run_id=self._run_id, status="approved"):
            rule = (gate.decision or {}).get("remember_rule")
            if isinstance(rule, str) and rule not in self._session_rules:
                self._session_rules.append(rule)

    async def decide(
        self,
        calls: list[ToolCall],
        decision: Decision,
        shape: GateShape | None,
        *,
        bound_call_id: str,
        bound_input_hash: str,
        cancelled: asyncio.Event,
        withdrawn: asyncio.Event | None = None,
    ) -> GateAnswer:
        """The answer to ``calls``: a session rule, an earlier decision bound to the same input,
        or a gate opened and waited for. ``cancelled`` ends the wait (the turn is cancelled or the
        agent withdrew the request); ``withdrawn`` set says it was the request alone, so only its
        own gate is denied (``withdrawn``) and the run's other pending gates stay open."""
        try:
            return await self._decide(calls, decision, shape, bound_call_id, bound_input_hash, cancelled, withdrawn)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # never fail open
            _log.exception("gating %s of run %s failed", bound_call_id, self._run_id)
            return GateAnswer("deny", "gate_error", f"baton could not gate this call ({exc}); it is denied")

    async def _decide(
        self,
        calls: list[ToolCall],
        decision: Decision,
        shape: GateShape | None,
        bound_call_id: str,
        bound_input_hash: str,
        cancelled: asyncio.Event,
        withdrawn: asyncio.Event | None,
    ) -> GateAnswer:
        call = calls[0]
        await self.settle()
        if shape is None and not decision.reason.startswith("protected_path:"):
            rule = self._session_rule_for(calls)
            if rule is not None:
                return GateAnswer("allow", f"session_rule:{rule}", f"{call.tool_name} is allowed by {rule} (this run)")
        prior = await self._prior(bound_input_hash, call.tool_call_id)
        if prior is not None:
            if prior.status == "approved":
                await self._ledger.mark_used(prior.id, call.tool_call_id)
            self._note(
                "gate_used",
                {"gate_id": prior.id, "bound_call_id": prior.bound_call_id, "call_id": call.tool_call_id},
            )
            return await self._answer(prior, call)
        kind = shape.kind if shape is not None else "tool"
        async with self._opening:  # a gate opened next sees this one as awaited
            gate, superseded = await self._open(kind, call, decision, shape, bound_call_id, bound_input_hash)
            self._awaited.add(gate.id)
        try:
            return await self._wait(gate, call, decision, superseded, cancelled, withdrawn)
        finally:
            self._awaited.discard(gate.id)

    async def _open(
        self,
        kind: GateKind,
        call: ToolCall,
        decision: Decision,
        shape: GateShape | None,
        bound_call_id: str,
        bound_input_hash: str,
    ) -> tuple[GateRecord, list[GateRecord]]:
        return await self._ledger.open(
            self._run_id,
            kind,
            summary=shape.summary if shape is not None else _summary(call, decision),
            tool_name=call.tool_name,
            tool_call_id=call.tool_call_id,
            bound_call_id=bound_call_id,
            bound_input_hash=bound_input_hash,
            input=call.input,
            questions=shape.questions if shape is not None else None,
            plan=shape.plan if shape is not None else None,
            expires_in_seconds=self._expiry,
            keep=self._awaited,
        )

    async def _wait(
        self,
        gate: GateRecord,
        call: ToolCall,
        decision: Decision,
        superseded: list[GateRecord],
        cancelled: asyncio.Event,
        withdrawn: asyncio.Event | None,
    ) -> GateAnswer:
        for old in superseded:
            self._note(
                "gate_resolved",
                {"gate_id": old.id, "decision": "superseded", "reason": "superseded", "decided_by": "baton"},
            )
        await self._lifecycle.pause_on_gate(
            gate.id,
            {
                "gate_id": gate.id,
                "kind": gate.kind,
                "tool_call_id": gate.tool_call_id,
                "tool_name": gate.tool_name,
                "bound_call_id": gate.bound_call_id,
                "bound_input_hash": gate.bound_input_hash,
                "summary": gate.summary,
                "expires_at": gate.expires_at,
                "reason": decision.reason,
            },
        )
        if not self._waiting:
            self._wait_started = time.monotonic()
        self._waiting += 1
        try:
            decided = await wait_for_decision(self._store, self._run_id, gate.id, within=self._grace, stop=cancelled)
        finally:
            self._waiting -= 1
            if not self._waiting:
                self._waited += time.monotonic() - self._wait_started
        if decided is None and withdrawn is not None and withdrawn.is_set():
            try:
                decided = await self._ledger.decide(gate.id, WITHDRAWN_DENIAL, decided_by=WITHDRAWN_BY)
            except GateError:  # decided by someone else as it was withdrawn: that decision stands
                decided = await self._ledger.get(gate.id)
        elif decided is None and cancelled.is_set():
            await self._ledger.deny_all_pending(self._run_id, reason="cancelled", decided_by="cancel")
            decided = await self._ledger.get(gate.id)
        if decided is None:
            self.parked = gate
            self.park_event.set()
            return GateAnswer("park", "parked", "the run parks until the gate is decided", gate_id=gate.id)
        # Bookkeeping after the answer (the agent goes on at once); every later lookup waits for it.
        self._later(self._lifecycle.gate_decided)
        if decided.status == "approved" and decided.kind == "tool":
            self._later(lambda: self._ledger.mark_used(decided.id, call.tool_call_id))  # never for another call
        return await self._answer(decided, call)

    def _later(self, work: Callable[[], Awaitable[object]]) -> None:
        """Run ``work`` after the bookkeeping scheduled before it, off the agent's path."""
        previous = self._books

        async def chained() -> None:
            if previous is not None:
                await previous
            try:
                await work()
            except Exception:  # logged; the gate's decision itself is already recorded
                _log.exception("bookkeeping after a gate of run %s failed", self._run_id)

        self._books = asyncio.create_task(chained(), name=f"baton-gate-books-{self._run_id}")

    async def settle(self) -> None:
        """Wait for the bookkeeping after the last decision (the run's status, the approval used)."""
        if self._books is not None:
            await asyncio.shield(self._books)

    async def _answer(self, gate: GateRecord, call: ToolCall) -> GateAnswer:
        decision = gate.decision or {}
        self._note(
            "gate_resolved",
            {
                "gate_id": gate.id,
                "decision": decision.get("decision") or gate.status,
                "reason": decision.get("reason"),
                "decided_by": gate.decided_by,
            },
        )
        rule = decision.get("remember_rule")
        remembered = gate.status == "approved" and decision.get("remember") == "session"
        if remembered and isinstance(rule, str) and rule not in self._session_rules:
            self._session_rules.append(rule)
            self._note("session_rule", {"rule": rule, "gate_id": gate.id})
        answer = answer_for_agent(gate, call)
        if answer.mode is not None and answer.allow and self._on_mode is not None:
            await self._on_mode(answer.mode)
        return GateAnswer(
            "allow" if answer.allow else "deny",
            answer.reason or ("human" if answer.allow else "denied"),
            answer.message,
            updated_input=answer.updated_input,
            interrupt=answer.interrupt,
            decided_by=gate.decided_by,
            gate_id=gate.id,
        )

    async def _prior(self, bound_input_hash: str, call_id: str) -> GateRecord | None:
        """A gate decided for this call before it reached the host again: an unused approval of
        the same input (a re-proposal), or any decision of this very call (Claude re-evaluating
        a deferred call on resume)."""
        approved = await self._ledger.approved_for(self._run_id, bound_input_hash)
        if approved is not None:
            return approved
        for gate in await self._ledger.list(run_id=self._run_id):
            if (
                gate.tool_call_id == call_id
                and gate.bound_input_hash == bound_input_hash
                and gate.status in ("denied", "expired", "answered", "approved")
            ):
                return gate
        return None

    def _session_rule_for(self, calls: list[ToolCall]) -> str | None:
        for text in self._session_rules:
            try:
                rule = parse_rule(text, source="session")
            except Exception:  # a rule baton suggested that does not parse: never allows
                continue
            policy = Policy(mode=self._gatekeeper.policy.mode, allow=(rule,))
            judge = Gatekeeper(policy, self._gatekeeper.workspace)
            if all(_allowed_by_rule(judge.decide(call)) for call in calls):
                return text
        return None


def _allowed_by_rule(decision: Decision) -> bool:
    return decision.behavior == "allow" and decision.reason.startswith("rule:")


def _summary(call: ToolCall, decision: Decision) -> str:
    data = call.input if isinstance(call.input, dict) else {}
    for key in ("command", "file_path", "path", "url", "pattern"):
        value = data.get(key)
        if isinstance(value, str) and value:
            text = f"{call.tool_name}: {value}"
            return text if len(text) <= 200 else text[:199] + "…"
    return decision.message[:200] or call.tool_name
