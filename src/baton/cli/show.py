"""``baton show RUN [--json]``: one run in detail — its record, executor, transitions, conversation."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated, Any

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError
from baton.runs.executors import executor_alive
from baton.runs.queries import Runs

__all__ = ["show_command"]

_DETAILS = ("cwd", "agent_session_id", "resumed_from", "started_at", "error_code", "error_message", "budget_usd")


@app.command("show")
def show_command(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    json_output: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """Show a run: the run object, where it executes, its status transitions and log size."""
    try:
        body = asyncio.run(_show(Settings.load(), run_id))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(body, ensure_ascii=False) + "\n")
        return
    for key, value in body.items():
        if key == "transitions":
            continue
        if key == "sandbox":
            sys.stdout.write(f"{'sandbox:':<18} {_sandbox_line(value)}\n")
            continue
        if key == "workspace":
            for name, detail in value.items():
                sys.stdout.write(f"{name + ':':<18} {'-' if detail is None else detail}\n")
            continue
        if key == "setup":
            _write_setup(value)
            continue
        sys.stdout.write(f"{key + ':':<18} {'-' if value is None else value}\n")
    sys.stdout.write("transitions:\n")
    for step in body["transitions"]:
        sys.stdout.write(
            f"  {step['at']}  {step['from_status'] or '·'} → {step['to_status']}  {step['reason'] or ''}\n"
        )


def _write_setup(setup: dict[str, Any] | None) -> None:
    if setup is None:
        sys.stdout.write(f"{'setup:':<18} -\n")
        return
    status = setup["status"]
    if status == "skipped":
        sys.stdout.write(f"{'setup:':<18} skipped: {setup.get('reason')}\n")
        if setup.get("hint"):
            sys.stdout.write(f"{'hint:':<18} {setup['hint']}\n")
        return
    line = str(status)
    if setup.get("exit_code") is not None:
        line += f" (exit {setup['exit_code']})"
    if isinstance(setup.get("duration_ms"), int):
        line += f" in {setup['duration_ms'] / 1000:.1f} s"
    sys.stdout.write(f"{'setup:':<18} {line}\n")


def _setup_of(note: dict[str, Any] | None) -> dict[str, Any] | None:
    """The run's setup as its last ``_baton/setup`` note says (docs/workspaces.md "Setup"),
    without its output: ``skipped`` with the reason and the hint, or how it ended."""
    if note is None:
        return None
    status = note.get("status")
    shown = {"status": "running" if status in ("started", "output") else status}
    for key in ("exit_code", "duration_ms", "reason", "hint", "gate_id"):
        if key in note and status not in ("started", "output"):
            shown[key] = note[key]
    return shown


def _sandbox_line(sandbox: dict[str, Any] | None) -> str:
    if sandbox is None:
        return "-"
    bwrap = sandbox.get("bwrap") or {}
    if sandbox.get("containment") != "pid_namespace":
        return f"none: {sandbox.get('code')} ({bwrap.get('reason')})"
    line = f"{sandbox.get('mode')} (bubblewrap {bwrap.get('version')}, pid namespace, network {sandbox.get('network')})"
    if sandbox.get("mode") == "bwrap":
        line += f"; writable: {', '.join(sandbox.get('writable') or [])}"
    return line


async def _show(settings: Settings, run_id: str) -> dict[str, Any]:
    from baton.runs.fleet import fleet_request, run_labels, run_priority  # the store: not at import

    async with Runs(settings) as runs:
        record = await runs.get_run(run_id)
        transitions = await runs.transitions(run_id)
        last_seq = await runs.log_position(run_id)
        sandbox = await runs.last_note(run_id, "_baton/sandbox")
        trace = await runs.last_note(run_id, "_baton/trace")
        setup = await runs.last_note(run_id, "_baton/setup")
    body = record.to_dict()
    body.update({name: getattr(record, name) for name in _DETAILS})
    body["executor_id"] = record.executor_id
    body["executor_alive"] = executor_alive(record.executor_id, record.heartbeat_at)
    body["log_entries"] = last_seq
    body["setup"] = _setup_of(setup)  # the workspace's setup, or why it was skipped and what to do
    body["sandbox"] = sandbox  # where the run's latest execution ran its agent (docs/sandbox.md)
    # The latest execution's OpenTelemetry trace, when traces were exported (docs/observability.md).
    body["trace_id"] = trace.get("trace_id") if trace else None
    if fleet_request(record) is not None:  # what it asks of its worker and its place on the queue
        body["labels"] = ",".join(f"{key}={value}" for key, value in run_labels(record).items()) or None
        body["priority"] = run_priority(record)
    body["transitions"] = [step.to_dict() for step in transitions]
    return body
