"""``baton rm RUN``: a run removed entirely — its workspace (as ``gc`` would), its rows (log,
events, snapshots, gates, inbox), its folder under ``runs/`` and the snapshot archives no other
run shares. A live run (queued, running, or paused on a gate) is refused with ``run_active``;
a workspace whose branch is neither merged nor pushed with ``branch_not_merged`` unless ``force``.
A workspace another run still works in (a run continuing this one) stays.

``baton gc --runs`` (:func:`collect_runs`) is retention for whole runs: every run that ended
(``finished``, ``failed``, ``cancelled``; never an ``interrupted`` one, which may be resumed)
longer ago than ``--older-than`` (default ``[runs] retention``) is removed as ``baton rm``
removes it; one whose workspace ``rm`` would refuse without ``--force`` is kept, with the reason.
"""

from __future__ import annotations

import datetime
import shutil
from dataclasses import dataclass, field
from typing import Any

from baton.config import Settings
from baton.errors import RefusedError
from baton.snapshots.blobs import LocalBlobStore, blob_store_for
from baton.store import Store
from baton.store.records import TERMINAL_STATUSES, RunRecord
from baton.workspaces.gc import WorkspaceEntry, ended_longer_ago, keep_reason, list_workspaces, remove_workspace
from baton.workspaces.ports import release_ports

__all__ = ["RemovedRun", "RunsGcResult", "collect_runs", "remove_run"]


@dataclass
class RemovedRun:
    run_id: str
    workspace: str | None = None  # the folder removed
    kept_workspace: str | None = None  # the folder kept: another run works in it
    blobs: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "workspace_removed": self.workspace,
            "workspace_kept": self.kept_workspace,
            "blobs_removed": self.blobs,
            "notes": self.notes,
        }


async def remove_run(
    store: Store, settings: Settings, record: RunRecord, records: list[RunRecord], *, force: bool = False
) -> RemovedRun:
    """Remove ``record`` (its effective status: see the module doc); ``records`` are all runs."""
    if record.status not in TERMINAL_STATUSES and record.status != "interrupted":
        raise RefusedError("run_active", f"run {record.id} is {record.status}: cancel it first (baton cancel)")
    result = RemovedRun(record.id)
    entry = next((e for e in list_workspaces(settings, records, sizes=False) if record in e.runs), None)
    if entry is not None and entry.exists:
        _remove_workspace(settings, entry, record, result, force=force)
    keys = {str(s["archive_key"]) for s in await store.list_snapshots(record.id) if s.get("archive_key")}
    for other in records:
        if other.id != record.id and keys:
            keys -= {str(s["archive_key"]) for s in await store.list_snapshots(other.id) if s.get("archive_key")}
    await store.delete_run_rows(record.id)
    shutil.rmtree(settings.run_dir(record.id), ignore_errors=True)
    release_ports(settings.home, record.id)
    blobs = blob_store_for(None, settings.home)
    if isinstance(blobs, LocalBlobStore):
        for key in keys:
            path = blobs.path_of(key)
            if path.is_file():
                path.unlink()
                result.blobs += 1
    elif keys:
        result.notes.append(f"{len(keys)} snapshot archive(s) left in the remote blob store")
    return result


def _remove_workspace(
    settings: Settings, entry: WorkspaceEntry, record: RunRecord, result: RemovedRun, *, force: bool
) -> None:
    if any(run.id != record.id for run in entry.runs):
        result.kept_workspace = entry.path
        result.notes.append(f"{entry.path} stays: run {entry.runs[-1].id} works in it too")
        return
    reason = keep_reason(entry)
    if reason is not None and not force:
        raise RefusedError(
            "branch_not_merged",
            f"{entry.path}: {reason}; baton rm --force removes it anyway",
            details={"path": entry.path},
        )
    remove_workspace(settings, entry)
    result.workspace = entry.path


@dataclass
class RunsGcResult:
    """What ``baton gc --runs`` removed (or, ``dry_run``, would remove) and what it kept, why."""

    removed: list[tuple[RunRecord, RemovedRun]] = field(default_factory=list)
    kept: list[tuple[RunRecord, str]] = field(default_factory=list)
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "removed": [{**_run_json(record), **removed.to_json()} for record, removed in self.removed],
            "kept": [{**_run_json(record), "reason": reason} for record, reason in self.kept],
        }


def _run_json(record: RunRecord) -> dict[str, Any]:
    return {"run_id": record.id, "status": record.status, "ended_at": record.finished_at or record.created_at}


async def collect_runs(
    store: Store,
    settings: Settings,
    records: list[RunRecord],
    *,
    older_than: float,
    dry_run: bool = False,
    force: bool = False,
    now: datetime.datetime | None = None,
) -> RunsGcResult:
    """Remove (``dry_run``: only name) the ended runs older than ``older_than`` seconds; see the module doc."""
    moment = now or datetime.datetime.now(datetime.UTC)
    result = RunsGcResult(dry_run=dry_run)
    entries = list_workspaces(settings, records, sizes=False)
    remaining = list(records)
    for record in records:
        if record.status not in TERMINAL_STATUSES:
            continue  # live, parked, or interrupted (resumable): not a candidate, not reported
        if not ended_longer_ago(record.finished_at or record.created_at, older_than, moment):
            result.kept.append((record, "ended too recently (--older-than)"))
            continue
        entry = next((e for e in entries if record in e.runs), None)
        reason = _workspace_refusal(entry, record) if entry is not None and not force else None
        if reason is not None:
            result.kept.append((record, reason))
            continue
        if dry_run:
            going = entry.path if entry is not None and _alone(entry, record) else None
            result.removed.append((record, RemovedRun(record.id, workspace=going)))
            continue
        removed = await remove_run(store, settings, record, remaining, force=force)
        remaining = [other for other in remaining if other.id != record.id]
        result.removed.append((record, removed))
    return result


def _alone(entry: WorkspaceEntry | None, record: RunRecord) -> bool:
    return entry is not None and entry.exists and all(run.id == record.id for run in entry.runs)


def _workspace_refusal(entry: WorkspaceEntry, record: RunRecord) -> str | None:
    """Why ``rm`` would refuse the run's workspace without ``--force`` (None: it would not)."""
    if not _alone(entry, record):
        return None  # gone, or another run works in it: it stays and the run goes
    reason = keep_reason(entry)
    return f"its workspace {entry.path}: {reason}" if reason is not None else None
