"""Working-tree snapshots: a shadow git directory, archives, a blob store, restore (docs/snapshots.md).

- :class:`ShadowRepo` captures the user's working tree into ``BATON_HOME/runs/<run>/shadow.git``;
- :class:`SnapshotRecorder` decides when (after file tools, shell commands, turns) for a run;
- :func:`build_archive` / :func:`verify_archive` write and check snapshot archives;
- :class:`LocalBlobStore` keeps archives by content;
- :func:`restore_archive` puts a snapshot back, as a saga that rolls back on failure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from baton.snapshots._git import EMPTY_TREE, GitFailed, clean_environment, feed_git, run_git
from baton.snapshots.archive import ArchiveLimits, Manifest, build_archive, verify_archive
from baton.snapshots.blobs import BlobStore, LocalBlobStore, blob_store_for
from baton.snapshots.recorder import TREE_SNAPSHOT, SnapshotRecorder
from baton.snapshots.restore import GitObjects, RestoreResult, restore_archive
from baton.snapshots.shadow import Changes, ShadowRepo, Skipped, Snapshot

__all__ = [
    "EMPTY_TREE",
    "TREE_SNAPSHOT",
    "ArchiveLimits",
    "BlobStore",
    "Changes",
    "GitFailed",
    "GitObjects",
    "LocalBlobStore",
    "Manifest",
    "RestoreResult",
    "ShadowRepo",
    "Skipped",
    "Snapshot",
    "SnapshotRecorder",
    "blob_store_for",
    "build_archive",
    "clean_environment",
    "feed_git",
    "recorder_for",
    "restore_archive",
    "run_git",
    "shadow_for",
    "verify_archive",
]


def shadow_for(run_dir: Path, repo: Path) -> ShadowRepo:
    """The shadow repository of the run whose folder is ``run_dir`` (``BATON_HOME/runs/<id>``)."""
    return ShadowRepo(run_dir / "shadow.git", repo)


def recorder_for(*, run_id: str, run_dir: Path, repo: Path, home: Path, log: Any, store: Any) -> SnapshotRecorder:
    """A run's recorder with the default blob store (``BATON_HOME/blobs``)."""
    return SnapshotRecorder(
        run_id=run_id,
        shadow=shadow_for(run_dir, repo),
        blobs=blob_store_for(None, home),
        log=log,
        scratch=run_dir / "snapshot-scratch",
        store=store,
    )
