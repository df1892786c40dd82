"""``baton snapshots``, ``baton diff``, ``baton restore``, ``baton snapshot-export`` (docs/snapshots.md)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError, NotFoundError, UsageError
from baton.runs.queries import Runs

_COUNTS = (("+", "added"), ("~", "modified"), ("-", "deleted"))

__all__ = ["diff_command", "restore_command", "snapshot_export_command", "snapshots_command"]


async def _snapshots(settings: Settings, run_id: str) -> list[dict[str, Any]]:
    async with Runs(settings) as runs:
        return await runs.snapshots(run_id)


async def _snapshot(settings: Settings, run_id: str, snapshot_id: str) -> tuple[str, dict[str, Any]]:
    """The run's repository and one of its snapshots."""
    async with Runs(settings) as runs:
        record = await runs.get_run(run_id)
        return record.repo or record.cwd or ".", await runs.snapshot(run_id, snapshot_id)


async def _diff(run_id: str, from_: str | None, to: str | None) -> bytes:
    async with Runs(Settings.load()) as runs:
        return await runs.diff(run_id, from_, to)


@contextmanager
def _archive_of(settings: Settings, run_id: str, snapshot: dict[str, Any]) -> Iterator[Path]:
    from baton.snapshots import LocalBlobStore, blob_store_for

    key = snapshot.get("archive_key")
    if not key:
        raise NotFoundError("snapshot_not_found", f"snapshot {snapshot['id']} of run {run_id} has no archive")
    blobs = blob_store_for(None, settings.home)
    if isinstance(blobs, LocalBlobStore):
        path = blobs.path_of(key)
        if not path.is_file():
            raise NotFoundError("snapshot_not_found", f"the archive of snapshot {snapshot['id']} is missing ({key})")
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="baton-archive-") as folder:  # pragma: no cover - remote stores
        path = Path(folder) / "archive.tar.gz"
        blobs.fetch(key, path)
        yield path


@app.command("snapshots")
def snapshots_command(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    json_output: Annotated[bool, typer.Option("--json", help="One JSON array of snapshot objects.")] = False,
) -> None:
    """List a run's snapshots of the working tree."""
    try:
        found = asyncio.run(_snapshots(Settings.load(), run_id))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(found, ensure_ascii=False) + "\n")
        return
    for s in found:
        counts = " ".join(f"{sign}{len(s.get(key) or [])}" for sign, key in _COUNTS)
        logged = f"log {s.get('log_seq_from')}–{s.get('log_seq_to')}"
        sys.stdout.write(f"{s['id']:>4}  {str(s['tree_hash'])[:12]}  {counts}  {logged}  {s.get('created_at')}\n")


@app.command("diff")
def diff_command(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    from_: Annotated[str | None, typer.Option("--from", help="A snapshot id, `base` (the default) or `start`.")] = None,
    to: Annotated[str | None, typer.Option("--to", help="A snapshot id (default: the last one).")] = None,
) -> None:
    """The changes between two snapshots (by default: the base commit → the last snapshot), as a patch."""
    try:
        patch = asyncio.run(_diff(run_id, from_, to))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, False)) from None
    sys.stdout.buffer.write(patch)
    sys.stdout.flush()


@app.command("restore")
def restore_command(
    run_id: Annotated[str | None, typer.Argument(help="The run's id (or use --archive).")] = None,
    snapshot_id: Annotated[str | None, typer.Argument(help="The snapshot, e.g. s3.")] = None,
    to: Annotated[Path | None, typer.Option("--to", help="The folder to restore into.")] = None,
    archive: Annotated[Path | None, typer.Option("--archive", help="A snapshot archive file.")] = None,
    base_repo: Annotated[
        Path | None, typer.Option("--base-repo", help="A git repository that holds the base commit.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a dirty target.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="The result (and errors) as JSON.")] = False,
) -> None:
    """Put a snapshot's tree into a folder; everything is rolled back if a step fails."""
    from baton.snapshots import GitObjects, restore_archive, shadow_for

    try:
        if to is None:
            raise UsageError("invalid_argument", "--to DIR is required")
        base = GitObjects.of_repository(base_repo) if base_repo is not None else None
        label = "base_repo"
        if archive is not None:
            if run_id is not None:
                raise UsageError("invalid_argument", "give RUN SNAP or --archive FILE, not both")
            if not archive.is_file():
                raise UsageError("invalid_argument", f"--archive {archive} is not a file")
            result = restore_archive(archive, to, base=base, base_label=label, force=force)
        else:
            if run_id is None or snapshot_id is None:
                raise UsageError("invalid_argument", "give RUN SNAP (or --archive FILE)")
            settings = Settings.load()
            repo, snapshot = asyncio.run(_snapshot(settings, run_id, snapshot_id))
            if base is None:
                base, label = GitObjects(shadow_for(settings.run_dir(run_id), Path(repo)).environment), "shadow"
            with _archive_of(settings, run_id, snapshot) as path:
                result = restore_archive(path, to, base=base, base_label=label, force=force)
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(result.to_dict()) + "\n")
        return
    what = result.manifest.snapshot_id if result.manifest else "the snapshot"
    sys.stdout.write(
        f"restored {what} into {result.target}: {result.base_written} file(s) from the base ({result.base}), "
        f"{result.files_written} from the archive, {result.deleted} deleted\n"
    )
    for note in result.notes:
        sys.stdout.write(f"note: {note}\n")


@app.command("snapshot-export")
def snapshot_export_command(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    snapshot_id: Annotated[str, typer.Argument(help="The snapshot, e.g. s3.")],
    out: Annotated[Path, typer.Option("--out", help="Where to write the archive (.tar.gz).")],
) -> None:
    """Write a snapshot's archive (tar.gz with MANIFEST.json) to a file."""
    try:
        settings = Settings.load()
        _, snapshot = asyncio.run(_snapshot(settings, run_id, snapshot_id))
        with _archive_of(settings, run_id, snapshot) as path:
            shutil.copyfile(path, out)
    except BatonError as exc:
        raise typer.Exit(report_error(exc, False)) from None
    sys.stdout.write(f"{out}\n")
