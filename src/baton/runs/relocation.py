"""A run in a new place: its tree brought to the latest snapshot, its shadow seeded, Claude
Code's transcripts moved to the new working directory (``baton import``, and ``baton resume
--repo DIR`` on another machine that shares the store and the blob store; docs/handoff.md).

- :func:`restore_latest_snapshot` restores the run's latest snapshot into a folder that does not
  hold it already (:func:`holds_snapshot`), through the restore saga (``workspace_dirty`` unless
  ``force``), with the base commit from the folder's own repository when it has it;
- :func:`seed_shadow` gives a run that comes from elsewhere a shadow holding its snapshots,
  rebuilt from their archives over the base commit, so the next capture is ``s<N+1>`` and
  ``baton diff`` works between the old ones;
- :func:`move_claude_project`: Claude Code finds a session under
  ``.claude/projects/<the working directory, every other character than [a-zA-Z0-9] a dash>``.
"""

# ruff: noqa: PTH114, PTH115
# (os.readlink: a symlink's target as the archive records it)
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from baton.config import Settings
from baton.errors import NotFoundError, RefusedError
from baton.snapshots import (
    GitFailed,
    GitObjects,
    LocalBlobStore,
    RestoreResult,
    blob_store_for,
    restore_archive,
    run_git,
    shadow_for,
)
from baton.snapshots.archive import ArchiveLimits, Manifest, iter_members, verify_archive
from baton.snapshots.blobs import BlobStore
from baton.snapshots.shadow import ShadowRepo
from baton.store import Store

__all__ = [
    "blob_path",
    "claude_project_folder",
    "holds_snapshot",
    "move_claude_project",
    "restore_latest_snapshot",
    "restore_unless_held",
    "seed_shadow",
]

_SNAPSHOT_MESSAGE: Final = "baton snapshot "  # as ShadowRepo writes it
_CLAUDE_PROJECT_NAME_MAX: Final = 200  # Claude Code hashes longer project folder names


def blob_path(blobs: BlobStore, key: str, scratch: Path) -> Path:
    """A local file holding the blob (the store's own file, or a fetched copy)."""
    if isinstance(blobs, LocalBlobStore):
        path = blobs.path_of(key)
        if not path.is_file():
            raise NotFoundError("snapshot_not_found", f"the snapshot archive {key} is missing from {blobs.root}")
        return path
    fetched = scratch / key.partition(":")[2]
    blobs.fetch(key, fetched)
    return fetched


def claude_project_folder(cwd: str) -> str | None:
    """The folder Claude Code keeps a working directory's sessions in (``.claude/projects/<it>``),
    or None when the name would be hashed (longer than 200 characters)."""
    name = re.sub(r"[^a-zA-Z0-9]", "-", cwd)
    return name if len(name) <= _CLAUDE_PROJECT_NAME_MAX else None


def move_claude_project(agent_home: Path, cwd: str) -> str | None:
    """Claude Code finds a session by its working directory: move the run's transcripts to the
    folder of the new one, so the resume can take the native path."""
    projects = agent_home / ".claude" / "projects"
    if not projects.is_dir():
        return None
    new = claude_project_folder(cwd)
    if new is None:
        shutil.rmtree(projects)
        return (
            "the repository's path is too long for Claude Code's session folder: the resume rebuilds the conversation"
        )
    if (projects / new).is_dir():
        return None
    sources = [entry for entry in sorted(projects.iterdir()) if entry.is_dir() and not entry.is_symlink()]
    if not sources:
        return None
    (projects / new).mkdir()
    for source in sources:
        for transcript in source.iterdir():
            transcript.rename(projects / new / transcript.name)
        source.rmdir()
    return None


# -- restoring the latest snapshot (import, and resume --repo on a shared store) ---------------


def holds_snapshot(manifest: Manifest, target: Path) -> bool:
    """Whether ``target`` already has every file, symlink and deletion of the snapshot."""
    for listed in manifest.files:
        path = target / listed.path
        try:
            if os.path.islink(path) or not path.is_file() or path.stat().st_size != listed.size:
                return False
            if hashlib.sha256(path.read_bytes()).hexdigest() != listed.sha256:
                return False
        except OSError:
            return False
    for link, wanted in manifest.symlinks.items():
        if not os.path.islink(target / link) or os.readlink(target / link) != wanted:
            return False
    return not any(os.path.lexists(target / deleted) for deleted in manifest.deleted)


def restore_unless_held(
    archive: Path,
    target: Path,
    shadow_base: GitObjects | None,
    force: bool,
    limits: ArchiveLimits | None,
    *,
    base_repo: GitObjects | None = None,
    base_option: str | None = None,
) -> RestoreResult | None:
    """Restore the snapshot ``archive`` into ``target`` unless it holds it already (None then).

    The base commit's files come from ``target``'s own repository when it has the commit, else
    from ``base_repo`` (``--base-repo``), else from ``shadow_base``. An empty or missing ``target``
    with none of them having the commit is refused with ``base_commit_missing`` before anything
    is written: only the files the run changed could go there, not a working tree
    (``base_option``: the option the refusal suggests, when the caller has one).
    """
    manifest = verify_archive(archive, limits)
    if target.is_dir() and holds_snapshot(manifest, target):
        return None
    base, label = shadow_base, "shadow"
    commit = manifest.base_commit
    own = GitObjects.of_repository(target) if target.is_dir() and (target / ".git").exists() else None
    if commit and own is not None and own.has_commit(commit):
        base, label = own, "base_repo"
    elif commit and base_repo is not None and base_repo.has_commit(commit):
        base, label = base_repo, "base_repo"
    empty = not target.exists() or (target.is_dir() and not any(target.iterdir()))
    if commit and empty and not (base is not None and base.has_commit(commit)):
        also = f", or pass {base_option} DIR (a clone that has it)" if base_option else ""
        raise RefusedError(
            "base_commit_missing",
            f"{target} is empty and nothing here has the run's base commit {commit}: only the "
            f"{len(manifest.files) + len(manifest.symlinks)} files the run changed could be written there. "
            f"Clone the run's repository into {target} first (git clone URL {target}){also}",
            details={"base_commit": commit, "target": str(target)},
        )
    return restore_archive(archive, target, base=base, base_label=label, force=force, limits=limits)


def seed_shadow(
    run_dir: Path, target: Path, snapshots: Sequence[Mapping[str, Any]], archives: Mapping[str, Path]
) -> int:
    """A shadow for a run that comes from elsewhere, so its snapshot ids go on (``s<N+1>`` next).

    Each snapshot is rebuilt from its archive over its base commit (which a clone of the
    repository has), in order, while the tree comes out as recorded: ``baton diff`` then works
    between them. When one cannot be (no base here), the latest is recorded with the tree as
    restored instead. Returns how many were rebuilt exactly.
    """
    shadow = shadow_for(run_dir, target)
    if shadow.exists or not snapshots:
        return 0
    shadow.prepare()
    parent = shadow.git("rev-parse", "refs/baton/start").decode().strip()
    rebuilt = 0
    for snapshot in snapshots:
        archive = archives.get(str(snapshot.get("archive_key")))
        tree = _tree_of(shadow, archive) if archive is not None else None
        if tree is None or tree != snapshot.get("tree_hash"):
            break
        parent = _commit_snapshot(shadow, snapshot, tree, parent)
        rebuilt += 1
    if rebuilt < len(snapshots):  # the latest, as restored: the next capture compares with it
        latest = snapshots[-1]
        start_tree = shadow.git("rev-parse", "refs/baton/start^{tree}").decode().strip()
        _commit_snapshot(shadow, {**latest, "imported_tree_hash": latest.get("tree_hash")}, start_tree, parent)
    return rebuilt


def _tree_of(shadow: ShadowRepo, archive: Path) -> str | None:
    """The tree of the snapshot ``archive`` holds, written into the shadow (None without its base)."""
    with tempfile.TemporaryDirectory(prefix="baton-rebuild-") as scratch:
        env = {**shadow.environment, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        manifest: Manifest | None = None
        entries: list[tuple[str, str, Path]] = []
        for number, item in enumerate(iter_members(archive)):
            if isinstance(item, Manifest):
                manifest = item
                continue
            content = Path(scratch) / f"member-{number}"
            content.write_bytes(os.fsencode(item.link_target) if item.link_target is not None else item.data or b"")
            entries.append((item.mode, item.path, content))
        assert manifest is not None
        try:
            run_git(["read-tree", manifest.base_commit or "--empty"], env)
        except GitFailed:
            return None  # the base commit is not here
        if manifest.deleted:
            removed = b"".join(os.fsencode(path) + b"\0" for path in manifest.deleted)
            run_git(["update-index", "--force-remove", "-z", "--stdin"], env, input=removed)
        shas: list[str] = []
        if entries:
            paths = "".join(f"{content}\n" for _mode, _path, content in entries).encode()
            shas = run_git(["hash-object", "-w", "--no-filters", "--stdin-paths"], env, input=paths).decode().split()
        info = b"".join(
            f"{mode} {sha}\t".encode() + os.fsencode(path) + b"\0"
            for (mode, path, _content), sha in zip(entries, shas, strict=True)
        )
        info += b"".join(
            f"160000 {commit}\t".encode() + os.fsencode(path) + b"\0" for path, commit in manifest.submodules.items()
        )
        if info:
            run_git(["update-index", "-z", "--index-info"], env, input=info)
        return run_git(["write-tree"], env).decode().strip()


def _commit_snapshot(shadow: ShadowRepo, snapshot: Mapping[str, Any], tree: str, parent: str) -> str:
    """A snapshot commit as :class:`ShadowRepo` writes them (its record in the message), and its refs."""
    record = {key: value for key, value in snapshot.items() if key not in ("run_id",)}
    record["tree_hash"] = tree
    message = f"{_SNAPSHOT_MESSAGE}{snapshot['id']}\n\n{json.dumps(record, sort_keys=True)}\n"
    commit = shadow.git("commit-tree", tree, "-p", parent, "-F", "-", input=message.encode()).decode().strip()
    shadow.git("update-ref", f"refs/snapshots/{snapshot['id']}", commit)
    shadow.git("update-ref", "refs/heads/snapshots", commit)
    return commit


async def restore_latest_snapshot(
    store: Store, settings: Settings, run_id: str, target: Path, *, force: bool = False
) -> RestoreResult | None:
    """Bring ``target`` to the run's latest snapshot when it does not hold it (``baton resume
    --repo DIR`` on another machine sharing the store and the blob store); None when nothing
    was written. ``workspace_dirty`` when ``target`` has changes the restore would lose."""
    found = [snapshot for snapshot in await store.list_snapshots(run_id) if snapshot.get("archive_key")]
    if not found:
        return None
    latest = found[-1]
    run_dir = settings.run_dir(run_id)
    blobs = blob_store_for(None, settings.home)

    def work() -> RestoreResult | None:
        with tempfile.TemporaryDirectory(prefix="baton-resume-") as scratch:
            archives = {str(s["archive_key"]): blob_path(blobs, str(s["archive_key"]), Path(scratch)) for s in found}
            shadow = shadow_for(run_dir, target)
            base = GitObjects(shadow.environment) if shadow.exists else None
            restored = restore_unless_held(archives[str(latest["archive_key"])], target, base, force, None)
            seed_shadow(run_dir, target, [s for s in found if s.get("archive_key")], archives)
        return restored

    return await asyncio.to_thread(work)
