"""``baton export RUN --out FILE``, ``baton import FILE [--repo DIR]``: a run to another machine (docs/handoff.md)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError
from baton.runs.queries import Runs

if TYPE_CHECKING:  # the hand-off pulls in snapshots, ACP and the store: imported when a command runs
    from baton.runs.handoff import ExportResult, ImportResult

__all__ = ["export_command", "import_command"]


@app.command("export")
def export_command(
    run_id: Annotated[str, typer.Argument(help="The run to export.")],
    out: Annotated[Path, typer.Option("--out", help="The file to write (a .tar.gz).")],
    json_output: Annotated[bool, typer.Option("--json", help="The result (and errors) as JSON.")] = False,
) -> None:
    """Write a run — its log, events, snapshots and their archives, agent home — to one file."""
    try:
        result = asyncio.run(_export(Settings.load(), run_id, out))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
        return
    sys.stdout.write(
        f"exported run {result.run_id} ({result.status}) to {result.path}: {result.log_entries} log entries, "
        f"{result.snapshots} snapshot(s), {result.agent_home_files} agent-home file(s), {result.bytes} bytes\n"
    )
    for skipped in result.skipped:
        sys.stdout.write(f"left out of the agent home: {skipped['path']} ({skipped['reason']})\n")


@app.command("import")
def import_command(
    file: Annotated[Path, typer.Argument(help="A file written by `baton export`.")],
    repo: Annotated[
        Path | None, typer.Option("--repo", help="Where the run's repository is here (default: where it was).")
    ] = None,
    base_repo: Annotated[
        Path | None,
        typer.Option("--base-repo", help="A git repository with the run's base commit, when --repo is not a clone."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a dirty repository.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="The result (and errors) as JSON.")] = False,
) -> None:
    """Recreate an exported run in this BATON_HOME, its latest snapshot in the repository; then `baton resume RUN`."""
    try:
        result = asyncio.run(_import(Settings.load(), file, repo, base_repo, force))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
        return
    if result.restored is not None:
        tree = f"restored {result.snapshot_id} into {result.repo}"
    elif result.snapshot_id:
        tree = f"{result.repo} already holds {result.snapshot_id}"
    else:
        tree = f"no snapshot to restore; the run works in {result.repo}"
    sys.stdout.write(f"imported run {result.run_id} ({result.status}): {tree}\n")
    for note in result.notes:
        sys.stdout.write(f"note: {note}\n")
    if result.status not in ("finished", "failed", "cancelled"):
        sys.stdout.write(f"continue it with: baton resume {result.run_id}\n")


async def _export(settings: Settings, run_id: str, out: Path) -> ExportResult:
    async with Runs(settings) as runs:
        return await runs.export_run(run_id, out)


async def _import(
    settings: Settings, file: Path, repo: Path | None, base_repo: Path | None, force: bool
) -> ImportResult:
    async with Runs(settings) as runs:
        return await runs.import_run(file, repo=repo, base_repo=base_repo, force=force)
