"""Gates as the Python API hands them out (``await baton.gates(run_id=…, status=…)``).

Each method builds the decision body of docs/design.md "HTTP basics" and records it through the
:class:`~baton.gates.ledger.GateLedger`, so the API, the CLI and the HTTP server refuse the same
things with the same codes. The binding defaults to the gate's own (the human decides the gate
as listed); pass ``bound_call_id``/``bound_input_hash`` to check what a UI showed instead.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from baton.gates.ledger import GateKind, GateLedger, GateRecord

__all__ = ["Gate", "answers_from_selections", "local_user"]

PlanDecision = Literal["approve", "edit", "reject"]


class Gate:
    """One gate and the decisions it takes; ``record`` is the gate as last read or decided."""

    def __init__(
        self,
        ledger: GateLedger,
        record: GateRecord,
        *,
        decided_by: str,
        on_decided: Callable[[str], None] | None = None,
    ) -> None:
        self._ledger = ledger
        self.record = record
        self._decided_by = decided_by
        self._on_decided = on_decided

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def kind(self) -> GateKind:
        return self.record.kind

    @property
    def status(self) -> str:
        return self.record.status

    def to_json(self) -> dict[str, Any]:
        return self.record.to_json()

    def __repr__(self) -> str:
        return f"<Gate {self.id} {self.kind} {self.status}: {self.record.summary}>"

    async def refresh(self) -> GateRecord:
        self.record = await self._ledger.get(self.id)
        return self.record

    async def approve(
        self,
        *,
        updated_input: Mapping[str, Any] | None = None,
        remember: Literal["session"] | None = None,
        reason: str | None = None,
        bound_call_id: str | None = None,
        bound_input_hash: str | None = None,
    ) -> GateRecord:
        """Allow the call (a tool gate); ``updated_input`` replaces its input, ``remember="session"``
        stores the suggested rule for the rest of the run."""
        body: dict[str, Any] = {"decision": "approve", **self._binding(bound_call_id, bound_input_hash)}
        if updated_input is not None:
            body["updated_input"] = dict(updated_input)
        if remember is not None:
            body["remember"] = remember
        if reason is not None:
            body["reason"] = reason
        return await self._decide(body, "tool")

    async def deny(self, *, reason: str | None = None, interrupt: bool = False) -> GateRecord:
        """Refuse (any kind of gate); ``reason`` is shown to the agent, ``interrupt`` ends its turn."""
        body: dict[str, Any] = {"decision": "deny", "interrupt": interrupt}
        if reason is not None:
            body["reason"] = reason
        return await self._decide(body, None)

    async def answer(
        self,
        answers: Sequence[Mapping[str, Any]] | Mapping[str, str | Sequence[str]],
        *,
        notes: Mapping[str, str] | None = None,
        bound_call_id: str | None = None,
        bound_input_hash: str | None = None,
    ) -> GateRecord:
        """Answer a question gate: ``[{header, selected, note?}]``, or ``{header: option(s)}``."""
        listed = answers_from_selections(answers, notes) if isinstance(answers, Mapping) else [dict(a) for a in answers]
        body = {"decision": "answer", "answers": listed, **self._binding(bound_call_id, bound_input_hash)}
        return await self._decide(body, "question")

    async def review_plan(
        self, decision: PlanDecision, *, edited_plan: str | None = None, reason: str | None = None
    ) -> GateRecord:
        """Approve, edit (with ``edited_plan``) or reject a plan_review gate."""
        body: dict[str, Any] = {"decision": decision}
        if edited_plan is not None:
            body["edited_plan"] = edited_plan
        if reason is not None:
            body["reason"] = reason
        return await self._decide(body, "plan_review")

    async def continue_run(
        self, *, budget_usd: float | None = None, max_turns: int | None = None, max_seconds: float | None = None
    ) -> GateRecord:
        """Let a run that reached its budget go on, optionally with a new budget (resource_limit gates)."""
        budget = {
            name: value
            for name, value in (("usd", budget_usd), ("turns", max_turns), ("seconds", max_seconds))
            if value is not None
        }
        body: dict[str, Any] = {"decision": "continue"}
        if budget:
            body["budget"] = budget
        return await self._decide(body, "resource_limit")

    def _binding(self, bound_call_id: str | None, bound_input_hash: str | None) -> dict[str, Any]:
        return {
            "bound_call_id": self.record.bound_call_id if bound_call_id is None else bound_call_id,
            "bound_input_hash": self.record.bound_input_hash if bound_input_hash is None else bound_input_hash,
        }

    async def _decide(self, body: dict[str, Any], kind: GateKind | None) -> GateRecord:
        self.record = await self._ledger.decide(self.id, body, decided_by=self._decided_by, kind=kind)
        if self._on_decided is not None:
            self._on_decided(self.id)
        return self.record


def answers_from_selections(
    selections: Mapping[str, str | Sequence[str]], notes: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """``{"Database": "Postgres", "Extras": ["docs", "tests"]}`` as the answers list."""
    answers: list[dict[str, Any]] = []
    for header, chosen in selections.items():
        selected = [chosen] if isinstance(chosen, str) else list(chosen)
        answer: dict[str, Any] = {"header": header, "selected": selected}
        if notes and header in notes:
            answer["note"] = notes[header]
        answers.append(answer)
    for header, note in (notes or {}).items():
        if header not in selections:
            answers.append({"header": header, "selected": [], "note": note})
    return answers


def local_user() -> str:
    """Who decides from this machine's CLI or API (``decided_by``): the login name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER (some containers)
        return "local"
