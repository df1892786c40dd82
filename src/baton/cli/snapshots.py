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
from baton.snapshots import GitObjects, LocalBlobStore, blob_store_for, restore_archive, shadow_for
from baton.snapshots._git import EMPTY_TREE
from baton.store import Store

_COUNTS = (("+", "added"), ("~", "modified"), ("-", "deleted"))

__all__ = ["diff_command", "restore_command", "snapshot_export_command", "snapshots_command"]


async def _run_snapshots(settings: Settings, run_id: str) -> tuple[str, list[dict[str, Any]]]:
    """The run's repository and its snapshots (the store's records, else the shadow's)."""
    store = await asyncio.to_thread(Store.open, settings.resolved_database_url)
    async with store:
        record = await store.get_run(run_id)
        found = await store.list_snapshots(run_id)
    repo = record.repo or record.cwd or "."
    if not found:
        found = shadow_for(settings.run_dir(run_id), Path(repo)).snapshots()
        for snapshot in found:
            snapshot.setdefault("run_id", run_id)
    return repo, found


def _load(run_id: str) -> tuple[Settings, str, list[dict[str, Any]]]:
    settings = Settings.load()
    repo, found = asyncio.run(_run_snapshots(settings, run_id))
    return settings, repo, found


def _pick(found: list[dict[str, Any]], run_id: str, snapshot_id: str) -> dict[str, Any]:
    for snapshot in found:
        if snapshot["id"] == snapshot_id:
            return snapshot
    raise NotFoundError("snapshot_not_found", f"run {run_id} has no snapshot {snapshot_id}")


@contextmanager
def _archive_of(settings: Settings, run_id: str, snapshot: dict[str, Any]) -> Iterator[Path]:
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
        _, _, found = _load(run_id)
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
        settings, repo, found = _load(run_id)
        if not found:
            raise NotFoundError("snapshot_not_found", f"run {run_id} has no snapshots")
        target = _pick(found, run_id, to) if to else found[-1]
        shadow = shadow_for(settings.run_dir(run_id), Path(repo))
        if from_ is None or from_ == "base":
            old = str(target.get("base_commit") or EMPTY_TREE)
        elif from_ == "start":
            old = "refs/baton/start"
        else:
            old = str(_pick(found, run_id, from_)["tree_hash"])
        patch = shadow.git("diff", "--no-color", "--binary", "-M", old, str(target["tree_hash"]))
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
            settings, repo, found = _load(run_id)
            snapshot = _pick(found, run_id, snapshot_id)
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
        settings, _, found = _load(run_id)
        snapshot = _pick(found, run_id, snapshot_id)
        with _archive_of(settings, run_id, snapshot) as path:
            shutil.copyfile(path, out)
    except BatonError as exc:
        raise typer.Exit(report_error(exc, False)) from None
    sys.stdout.write(f"{out}\n")
