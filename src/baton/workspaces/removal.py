"""``baton rm RUN``: a run removed entirely — its workspace (as ``gc`` would), its rows (log,
events, snapshots, gates, inbox), its folder under ``runs/`` and the snapshot archives no other
run shares. A live run (queued, running, or paused on a gate) is refused with ``run_active``;
a workspace whose branch is neither merged nor pushed with ``branch_not_merged`` unless ``force``.
A workspace another run still works in (a run continuing this one) stays.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import Any

from baton.config import Settings
from baton.errors import RefusedError
from baton.snapshots.blobs import LocalBlobStore, blob_store_for
from baton.store import Store
from baton.store.records import TERMINAL_STATUSES, RunRecord
from baton.workspaces.gc import WorkspaceEntry, keep_reason, list_workspaces, remove_workspace
from baton.workspaces.ports import release_ports

__all__ = ["RemovedRun", "remove_run"]


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
