"""``baton gates``, ``approve``, ``deny``, ``answer``, ``review-plan``, ``continue``: gates from any process.

A decision is recorded in the store and put in the run's inbox, whether or not a process
executes the run (docs/gates.md). ``GATE`` is a gate id, or a run id when that run has exactly
one pending gate of the command's kind (else ``gate_ambiguous``). The binding defaults to the
gate as listed. Every refusal prints its code (as ``{"error": …}`` on stderr under ``--json``)
and exits 3; a malformed option exits 2.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError, UsageError
from baton.runs.queries import GATE_STATUSES, GateRecord, Runs

if TYPE_CHECKING:  # the ledger pulls in SQLAlchemy: imported by the commands that decide
    from baton.gates.handles import Gate
    from baton.gates.ledger import GateKind, GateLedger

__all__ = [
    "answer_command",
    "approve_command",
    "continue_command",
    "deny_command",
    "gates_command",
    "review_plan_command",
]

_JSON = typer.Option("--json", help="Print the gate object; errors as JSON on stderr.")
_GATE = typer.Argument(help="A gate id, or a run id with exactly one such gate pending.")
Decision = Callable[["Gate"], Awaitable[GateRecord]]


@app.command("gates")
def gates_command(
    run_id: Annotated[str | None, typer.Option("--run", help="Only this run's gates.")] = None,
    status: Annotated[str | None, typer.Option("--status", help="Only gates with this status (pending, …).")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON array of gate objects.")] = False,
) -> None:
    """List gates: id, run, kind, status, what is asked."""
    try:
        if status is not None and status not in GATE_STATUSES:
            raise UsageError("invalid_argument", f"--status must be one of {', '.join(sorted(GATE_STATUSES))}")
        gates = asyncio.run(_listed(run_id, status))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps([gate.to_json() for gate in gates], ensure_ascii=False) + "\n")
        return
    if not gates:
        sys.stdout.write("no gates\n")
        return
    sys.stdout.write(f"{'ID':<31}  {'RUN':<30}  {'KIND':<14}  {'STATUS':<10}  SUMMARY\n")
    for gate in gates:
        summary = gate.summary.replace("\n", " ")
        sys.stdout.write(f"{gate.id:<31}  {gate.run_id:<30}  {gate.kind:<14}  {gate.status:<10}  {summary}\n")


@app.command("approve")
def approve_command(
    gate: Annotated[str, _GATE],
    bound_call_id: Annotated[str | None, typer.Option("--bound-call-id", help="The call the human saw.")] = None,
    bound_input_hash: Annotated[
        str | None, typer.Option("--bound-input-hash", help="The input hash the human saw.")
    ] = None,
    updated_input: Annotated[
        str | None, typer.Option("--updated-input", help="The input to run instead: JSON, or @FILE.")
    ] = None,
    remember: Annotated[
        str | None, typer.Option("--remember", help="'session': allow the suggested rule for the rest of the run.")
    ] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why (kept with the decision).")] = None,
    json_output: Annotated[bool, _JSON] = False,
) -> None:
    """Approve a tool gate (the call runs, with --updated-input if given)."""

    def decide(handle: Gate) -> Awaitable[GateRecord]:
        edited = _json_object(updated_input, "--updated-input") if updated_input is not None else None
        if remember not in (None, "session"):
            raise UsageError("invalid_argument", "--remember: only 'session'")
        return handle.approve(
            updated_input=edited,
            remember="session" if remember else None,
            reason=reason,
            bound_call_id=bound_call_id,
            bound_input_hash=bound_input_hash,
        )

    _decide(gate, "tool", decide, json_output)


@app.command("deny")
def deny_command(
    gate: Annotated[str, _GATE],
    reason: Annotated[str | None, typer.Option("--reason", help="Why; shown to the agent.")] = None,
    interrupt: Annotated[bool, typer.Option("--interrupt", help="Also end the agent's turn.")] = False,
    json_output: Annotated[bool, _JSON] = False,
) -> None:
    """Deny a gate of any kind (with --interrupt the agent's turn ends too)."""
    _decide(gate, None, lambda handle: handle.deny(reason=reason, interrupt=interrupt), json_output)


@app.command("answer")
def answer_command(
    gate: Annotated[str, _GATE],
    select: Annotated[
        list[str] | None, typer.Option("--select", help="HEADER=OPTION (repeat for several, or several options).")
    ] = None,
    note: Annotated[list[str] | None, typer.Option("--note", help="HEADER=TEXT, a note with that answer.")] = None,
    answers: Annotated[
        str | None, typer.Option("--answers", help='[{"header", "selected": [..], "note"?}] as JSON, or @FILE.')
    ] = None,
    json_output: Annotated[bool, _JSON] = False,
) -> None:
    """Answer a question gate."""

    def decide(handle: Gate) -> Awaitable[GateRecord]:
        from baton.gates.handles import answers_from_selections

        if answers is not None:
            if select or note:
                raise UsageError("invalid_argument", "give --answers, or --select/--note, not both")
            listed = _json(answers, "--answers")
            if not isinstance(listed, list):
                raise UsageError("invalid_argument", "--answers: a JSON list of {header, selected, note?}")
            return handle.answer(listed)
        if not select:
            raise UsageError("invalid_argument", "give --select HEADER=OPTION (or --answers)")
        chosen: dict[str, list[str]] = {}
        for pair in select:
            header, option = _pair(pair, "--select")
            chosen.setdefault(header, []).append(option)
        notes = dict(_pair(pair, "--note") for pair in note or [])
        return handle.answer(answers_from_selections(chosen, notes))

    _decide(gate, "question", decide, json_output)


@app.command("review-plan")
def review_plan_command(
    gate: Annotated[str, _GATE],
    decision: Annotated[str, typer.Argument(help="approve, edit or reject.")],
    plan: Annotated[str | None, typer.Option("--plan", help="The edited plan (for edit): @FILE or the text.")] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why (shown to the agent).")] = None,
    json_output: Annotated[bool, _JSON] = False,
) -> None:
    """Approve, edit or reject a plan_review gate."""

    def decide(handle: Gate) -> Awaitable[GateRecord]:
        if decision not in ("approve", "edit", "reject"):
            raise UsageError("invalid_argument", f"the decision is approve, edit or reject, not {decision!r}")
        edited = _text_of(plan, "--plan") if plan is not None else None
        return handle.review_plan(decision, edited_plan=edited, reason=reason)  # type: ignore[arg-type]

    _decide(gate, "plan_review", decide, json_output)


@app.command("continue")
def continue_command(
    gate: Annotated[str, _GATE],
    budget_usd: Annotated[float | None, typer.Option("--budget-usd", help="A new cost budget.")] = None,
    max_turns: Annotated[int | None, typer.Option("--max-turns", help="A new turn budget.")] = None,
    max_seconds: Annotated[float | None, typer.Option("--max-seconds", help="A new time budget.")] = None,
    json_output: Annotated[bool, _JSON] = False,
) -> None:
    """Let a run that reached its budget continue (a resource_limit gate)."""

    def decide(handle: Gate) -> Awaitable[GateRecord]:
        return handle.continue_run(budget_usd=budget_usd, max_turns=max_turns, max_seconds=max_seconds)

    _decide(gate, "resource_limit", decide, json_output)


def _decide(gate_id: str, kind: GateKind | None, decide: Decision, json_output: bool) -> None:
    try:
        record = asyncio.run(_with_ledger(lambda ledger: _decided(ledger, gate_id, kind, decide)))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
        return
    decision = record.decision or {}
    sys.stdout.write(f"{record.status} {record.id} ({record.kind}: {record.summary})\n")
    if decision.get("remember_rule"):
        sys.stdout.write(f"remembered for this run: {decision['remember_rule']}\n")


async def _listed(run_id: str | None, status: str | None) -> list[GateRecord]:
    async with Runs(Settings.load()) as runs:
        return await runs.gates(run_id=run_id, status=status)  # expired first: a gate past its deadline


async def _decided(ledger: GateLedger, gate_id: str, kind: GateKind | None, decide: Decision) -> GateRecord:
    from baton.gates.handles import Gate, local_user

    if gate_id.startswith("run_"):
        record = await ledger.pending_one(gate_id, kind)
    else:
        record = await ledger.get(gate_id)
    return await decide(Gate(ledger, record, decided_by=local_user()))


async def _with_ledger(work: Callable[[GateLedger], Awaitable[Any]]) -> Any:
    from baton.gates.ledger import GateLedger
    from baton.store import Store

    settings = Settings.load()
    settings.home.mkdir(parents=True, exist_ok=True)
    store = await asyncio.to_thread(Store.open, settings.resolved_database_url)
    async with store:
        return await work(GateLedger(store))


def _text_of(value: str, option: str) -> str:
    """``@FILE`` is the file's text; anything else is the value itself."""
    if not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text()
    except OSError as exc:
        raise UsageError("invalid_argument", f"{option}: cannot read {value[1:]}: {exc.strerror}") from None


def _json(value: str, option: str) -> Any:
    try:
        return json.loads(_text_of(value, option))
    except ValueError as exc:
        raise UsageError("invalid_argument", f"{option}: not JSON: {exc}") from None


def _json_object(value: str, option: str) -> dict[str, Any]:
    parsed = _json(value, option)
    if not isinstance(parsed, dict):
        raise UsageError("invalid_argument", f"{option}: a JSON object")
    return parsed


def _pair(text: str, option: str) -> tuple[str, str]:
    header, sep, value = text.partition("=")
    if not sep or not header:
        raise UsageError("invalid_argument", f"{option}: HEADER=VALUE, not {text!r}")
    return header, value
