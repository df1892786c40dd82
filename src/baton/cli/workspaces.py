"""``baton workspaces``, ``baton gc [--runs] [--older-than 7d] [--dry-run] [--force]``, ``baton rm RUN``
(docs/workspaces.md): what runs' checkouts take on disk, and removing them (or whole ended runs)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated, Any, Literal

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings, parse_duration
from baton.errors import BatonError
from baton.runs.queries import Runs

__all__ = ["gc_command", "rm_command", "workspaces_command"]

JsonOption = Annotated[bool, typer.Option("--json", help="JSON on stdout.")]


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


@app.command("workspaces")
def workspaces_command(json_output: JsonOption = False) -> None:
    """List every workspace: its run, status, size on disk, branch and folder."""

    async def listed() -> list[dict[str, object]]:
        async with Runs(Settings.load()) as runs:
            return [entry.to_json() for entry in await runs.workspaces()]

    try:
        entries = asyncio.run(listed())
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(entries) + "\n")
        return
    if not entries:
        sys.stdout.write("no workspaces\n")
        return
    rows = [
        (
            str(entry["run_id"] or "-"),
            str(entry["status"]),
            str(entry["kind"]),
            _size(int(str(entry["size_bytes"]))) if entry["exists"] else "gone",
            str(entry["branch"] or "-"),
            str(entry["path"]),
        )
        for entry in entries
    ]
    headers = ("RUN", "STATUS", "KIND", "SIZE", "BRANCH", "PATH")
    widths = [max(len(header), *(len(row[i]) for row in rows)) for i, header in enumerate(headers)]
    for row in (headers, *rows):
        sys.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() + "\n")
    total = sum(int(str(entry["size_bytes"])) for entry in entries)
    sys.stdout.write(f"{len(entries)} workspace(s), {_size(total)}\n")


@app.command("gc")
def gc_command(
    older_than: Annotated[
        str | None,
        typer.Option("--older-than", help="Only runs that ended longer ago than this (7d, 12h; default: retention)."),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Remove workspaces whose branch is neither merged nor pushed too.")
    ] = False,
    whole_runs: Annotated[
        bool,
        typer.Option(
            "--runs",
            help="Remove ended runs entirely (log, snapshots, archives, workspace; default: [runs] retention).",
        ),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Remove the workspaces of ended runs (never a branch, never your working tree); --runs: the runs."""
    if whole_runs:
        _gc_runs(older_than, dry_run=dry_run, force=force, json_output=json_output)
        return

    result = _collected("workspaces", older_than, dry_run=dry_run, force=force, json_output=json_output)
    if result is None:
        return
    verb = "would remove" if dry_run else "removed"
    for entry in result["removed"]:
        sys.stdout.write(f"{verb} {entry['path']} ({entry['run_id'] or 'no run'}, {_size(entry['size_bytes'])})\n")
    for entry in result["kept"]:
        sys.stdout.write(f"kept {entry['path']}: {entry['reason']}\n")
    sys.stdout.write(f"{verb} {len(result['removed'])} workspace(s), {_size(int(result['freed_bytes']))}\n")


def _gc_runs(older_than: str | None, *, dry_run: bool, force: bool, json_output: bool) -> None:
    """``baton gc --runs``: retention for whole runs (baton.workspaces.removal.collect_runs)."""
    result = _collected("runs", older_than, dry_run=dry_run, force=force, json_output=json_output)
    if result is None:
        return
    verb = "would remove" if dry_run else "removed"
    for entry in result["removed"]:
        where = f" and its workspace {entry['workspace_removed']}" if entry["workspace_removed"] else ""
        sys.stdout.write(f"{verb} run {entry['run_id']} ({entry['status']}, ended {entry['ended_at']}){where}\n")
        for note in entry["notes"]:
            sys.stdout.write(f"note: {note}\n")
    for entry in result["kept"]:
        sys.stdout.write(f"kept run {entry['run_id']}: {entry['reason']}\n")
    sys.stdout.write(f"{verb} {len(result['removed'])} run(s), kept {len(result['kept'])}\n")


def _collected(
    what: Literal["workspaces", "runs"], older_than: str | None, *, dry_run: bool, force: bool, json_output: bool
) -> dict[str, Any] | None:
    """What ``baton gc`` removed (or would) of ``what``; None once written as JSON."""

    async def collected() -> dict[str, Any]:
        seconds = parse_duration(older_than) if older_than is not None else None
        async with Runs(Settings.load()) as runs:
            collect = runs.collect_runs if what == "runs" else runs.collect_workspaces
            return (await collect(older_than=seconds, dry_run=dry_run, force=force)).to_json()

    try:
        result = asyncio.run(collected())
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(result) + "\n")
        return None
    return result


@app.command("rm")
def rm_command(
    run_id: Annotated[str, typer.Argument(help="The run to remove entirely.")],
    force: Annotated[
        bool, typer.Option("--force", help="Remove its workspace even when its branch is neither merged nor pushed.")
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Remove a run entirely: workspace, log, snapshots and their archives (never a live run)."""

    async def removed() -> dict[str, object]:
        async with Runs(Settings.load()) as runs:
            return (await runs.remove_run(run_id, force=force)).to_json()

    try:
        result = asyncio.run(removed())
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(result) + "\n")
        return
    sys.stdout.write(f"removed run {run_id}")
    if result["workspace_removed"]:
        sys.stdout.write(f" and its workspace {result['workspace_removed']}")
    sys.stdout.write("\n")
    for note in result["notes"]:  # type: ignore[attr-defined]
        sys.stdout.write(f"note: {note}\n")
