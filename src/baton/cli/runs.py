"""``baton runs [--status S] [--json]``: the runs in this ``BATON_HOME``, oldest first."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated, Any

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError, UsageError
from baton.runs.executors import effective_status
from baton.store import RUN_STATUSES, RunRecord, Store

__all__ = ["run_object", "runs_command"]


def run_object(record: RunRecord) -> dict[str, Any]:
    """docs/design.md's run object; a ``running`` run whose executor is dead shows as ``interrupted``."""
    body = record.to_dict()
    status = effective_status(record.status, record.executor_id, record.heartbeat_at)
    if status != record.status:
        body["status"], body["status_reason"] = status, "executor_dead"
    return body


@app.command("runs")
def runs_command(
    status: Annotated[
        str | None, typer.Option("--status", help="Only runs with this status (queued, running, interrupted, …).")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON array of run objects.")] = False,
) -> None:
    """List runs: id, status, agent, creation time, cost, repository."""
    try:
        if status is not None and status not in RUN_STATUSES:
            raise UsageError("invalid_argument", f"--status must be one of {', '.join(sorted(RUN_STATUSES))}")
        runs = [run for run in asyncio.run(_list(Settings.load())) if status is None or run["status"] == status]
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(runs, ensure_ascii=False) + "\n")
        return
    if not runs:
        sys.stdout.write("no runs\n")
        return
    sys.stdout.write(f"{'ID':<30}  {'STATUS':<11}  {'AGENT':<7}  {'CREATED':<24}  {'COST':>8}  REPO\n")
    for run in runs:
        cost = f"${run['total_cost_usd']:.4f}" if isinstance(run["total_cost_usd"], int | float) else "-"
        sys.stdout.write(
            f"{run['id']:<30}  {run['status']:<11}  {run['agent']:<7}  {run['created_at']:<24}  {cost:>8}  "
            f"{run['repo'] or '-'}\n"
        )


async def _list(settings: Settings) -> list[dict[str, Any]]:
    settings.home.mkdir(parents=True, exist_ok=True)
    store = await asyncio.to_thread(Store.open, settings.resolved_database_url)
    async with store:
        return [run_object(record) for record in await store.list_runs()]
