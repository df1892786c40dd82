"""``baton send RUN MESSAGE``, ``baton close RUN``, ``baton cancel RUN``: commands through the run's inbox.

They work from any process: the command is a row in the run's inbox, which the process
executing the run is woken to take (docs/runs.md "Waiting"). Refused (exit 3, the code
on stderr) for a run that has ended (``run_not_running``); ``run_not_found`` for an unknown run.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError
from baton.runs.queries import Runs

if TYPE_CHECKING:
    from baton.runs.cancelling import Cancelled

__all__ = ["cancel_command", "close_command", "send_command"]

_JSON = typer.Option("--json", help='Print {"status": "queued", "inbox_id": N}; errors as JSON on stderr.')


@app.command("send")
def send_command(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    message: Annotated[str, typer.Argument(help="The next prompt of an interactive run.")],
    json_output: Annotated[bool, _JSON] = False,
) -> None:
    """Send a message to an interactive run: its next prompt."""
    _post(run_id, "user_message", {"content": message}, json_output)


@app.command("close")
def close_command(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    json_output: Annotated[bool, _JSON] = False,
) -> None:
    """End an interactive run once the turns asked before are done (it ends finished)."""
    _post(run_id, "close", {}, json_output)


@app.command("cancel")
def cancel_command(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    reason: Annotated[str | None, typer.Option("--reason", help="Why (kept in the log).")] = None,
    json_output: Annotated[bool, _JSON] = False,
) -> None:
    """Cancel a run wherever it executes: its turn is interrupted and it ends cancelled (a parked run: at once)."""
    try:
        cancelled = asyncio.run(_cancel(Settings.load(), run_id, reason))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(cancelled.to_json()) + "\n")
    elif cancelled.status == "cancelled":
        sys.stdout.write(f"cancelled {run_id} at once: it was parked, its pending gates are denied\n")
    else:
        sys.stdout.write(f"queued cancel for {run_id} (inbox {cancelled.inbox_id})\n")


def _post(run_id: str, kind: str, payload: dict[str, Any], json_output: bool) -> None:
    try:
        inbox_id = asyncio.run(_put(Settings.load(), run_id, kind, payload))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps({"status": "queued", "inbox_id": inbox_id}) + "\n")
    else:
        sys.stdout.write(f"queued {kind} for {run_id} (inbox {inbox_id})\n")


async def _put(settings: Settings, run_id: str, kind: str, payload: dict[str, Any]) -> int:
    async with Runs(settings) as runs:
        return await runs.post_command(run_id, kind, payload)


async def _cancel(settings: Settings, run_id: str, reason: str | None) -> Cancelled:
    async with Runs(settings) as runs:
        return await runs.cancel(run_id, reason)
