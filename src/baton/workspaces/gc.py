"""Listing and removing workspaces (``baton workspaces``, ``baton gc``, ``baton rm``).

A workspace (a worktree or a clone under ``BATON_HOME/workspaces/``) belongs to the runs that
worked in it (a run continuing an ended one works in the same). ``gc`` removes the workspaces
whose runs all ended (``finished``, ``failed``, ``cancelled``; an ``interrupted`` run may still
be resumed), longer ago than ``--older-than`` (default: ``[workspace] retention``), but never
one whose branch is neither merged nor pushed, nor one holding commits no ref reaches, unless
``force``. It never deletes a branch, and never touches the user's working tree, index or
``HEAD``: a worktree goes with ``git worktree remove`` and ``git worktree prune``.
"""

from __future__ import annotations

import datetime
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.config import Settings
from baton.store.records import TERMINAL_STATUSES, RunRecord
from baton.workspaces._git import git_text
from baton.workspaces.ports import release_ports
from baton.workspaces.record import WorkspaceRecord, workspace_of
from baton.workspaces.worktree import remove_worktree

__all__ = [
    "GcResult",
    "WorkspaceEntry",
    "collect",
    "ended_longer_ago",
    "keep_reason",
    "list_workspaces",
    "remove_workspace",
]


@dataclass
class WorkspaceEntry:
    """One workspace folder and the runs that worked in it (oldest first)."""

    path: str
    kind: str  # "worktree", "clone", or "orphan" (a folder no run names)
    repo: str | None
    runs: list[RunRecord] = field(default_factory=list)
    size_bytes: int = 0
    branch: str | None = None

    @property
    def exists(self) -> bool:
        return Path(self.path).is_dir()

    @property
    def status(self) -> str:
        return self.runs[-1].status if self.runs else "-"

    @property
    def ended(self) -> bool:
        return all(run.status in TERMINAL_STATUSES for run in self.runs)

    @property
    def ended_at(self) -> str | None:
        times = [run.finished_at or run.created_at for run in self.runs]
        return max(times) if times else None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "repo": self.repo,
            "runs": [run.id for run in self.runs],
            "run_id": self.runs[-1].id if self.runs else None,
            "status": self.status,
            "exists": self.exists,
            "size_bytes": self.size_bytes,
            "branch": self.branch,
        }


@dataclass
class GcResult:
    removed: list[WorkspaceEntry] = field(default_factory=list)
    kept: list[tuple[WorkspaceEntry, str]] = field(default_factory=list)
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "removed": [entry.to_json() for entry in self.removed],
            "kept": [{**entry.to_json(), "reason": reason} for entry, reason in self.kept],
            "freed_bytes": sum(entry.size_bytes for entry in self.removed),
        }


def list_workspaces(settings: Settings, records: Iterable[RunRecord], *, sizes: bool = True) -> list[WorkspaceEntry]:
    """Every worktree or clone a run recorded, and every folder under ``workspaces/`` none names."""
    found: dict[str, WorkspaceEntry] = {}
    for record in records:
        workspace = workspace_of(record.request)
        if workspace is None or not workspace.separate:
            continue
        entry = found.setdefault(workspace.path, WorkspaceEntry(workspace.path, workspace.kind, workspace.repo))
        entry.runs.append(record)
        entry.branch = _branch(record, workspace) or entry.branch
    root = settings.home / "workspaces"
    if root.is_dir():
        for folder in sorted(root.iterdir()):
            if folder.is_dir() and str(folder) not in found:
                found[str(folder)] = WorkspaceEntry(str(folder), "orphan", None)
    entries = sorted(found.values(), key=lambda entry: entry.runs[0].id if entry.runs else entry.path)
    if sizes:
        for entry in entries:
            entry.size_bytes = disk_usage(Path(entry.path))
    return entries


def _branch(record: RunRecord, workspace: WorkspaceRecord) -> str | None:
    """The branch the run left: its result's (``runs.result``, where baton.results writes it),
    else one its workspace record names."""
    result = record.result if isinstance(record.result, dict) else {}
    for branch in (result.get("branch"), workspace.extra.get("branch")):
        if isinstance(branch, str) and branch:
            return branch
    return None


def disk_usage(folder: Path) -> int:
    """Bytes the files under ``folder`` take on disk (hard links to a mirror's objects counted too)."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512  # noqa: PTH118
            except OSError:
                continue
    return total


def keep_reason(entry: WorkspaceEntry) -> str | None:
    """Why ``gc`` must not remove this workspace even when its runs ended (``--force`` does):
    its branch is neither merged nor pushed, or it holds commits no ref reaches; None: safe."""
    where = Path(entry.path)
    if not where.is_dir():
        return None
    refs_in = Path(entry.repo) if entry.kind == "worktree" and entry.repo else where
    if entry.branch is not None and refs_in.is_dir():
        commit = git_text(["rev-parse", "--verify", "--quiet", f"refs/heads/{entry.branch}^{{commit}}"], cwd=refs_in)
        if commit and not _merged_or_pushed(refs_in, entry.branch, commit):
            return f"branch {entry.branch} is neither merged nor pushed"
    head = git_text(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd=where)
    if head and not git_text(["for-each-ref", "--count=1", "--contains", head, "refs/"], cwd=where):
        return "its HEAD holds commits no branch or tag reaches"
    return None


def _merged_or_pushed(repo: Path, branch: str, commit: str) -> bool:
    containing = git_text(
        ["for-each-ref", "--format=%(refname)", "--contains", commit, "refs/heads", "refs/remotes"], cwd=repo
    )
    others = [ref for ref in (containing or "").splitlines() if ref != f"refs/heads/{branch}"]
    return bool(others)


def collect(
    settings: Settings,
    entries: Iterable[WorkspaceEntry],
    *,
    older_than: float | None,
    dry_run: bool = False,
    force: bool = False,
    now: datetime.datetime | None = None,
) -> GcResult:
    """Remove (or with ``dry_run`` only name) the workspaces ``gc`` may remove; see the module doc."""
    moment = now or datetime.datetime.now(datetime.UTC)
    result = GcResult(dry_run=dry_run)
    for entry in entries:
        if not entry.exists:
            continue
        reason = _why_kept(entry, older_than, moment, force)
        if reason is not None:
            result.kept.append((entry, reason))
            continue
        if not dry_run:
            remove_workspace(settings, entry)
        result.removed.append(entry)
    return result


def _why_kept(entry: WorkspaceEntry, older_than: float | None, moment: datetime.datetime, force: bool) -> str | None:
    if not entry.ended:
        return f"run {entry.runs[-1].id} is {entry.status}"
    ended_at = entry.ended_at
    if older_than is not None:
        stamp = _parse(ended_at) if ended_at else _mtime(Path(entry.path))
        if stamp is not None and (moment - stamp).total_seconds() < older_than:
            return "ended too recently (--older-than)"
    if not force:
        return keep_reason(entry)
    return None


def ended_longer_ago(stamp: str | None, seconds: float, moment: datetime.datetime) -> bool:
    """Whether a run that ended at ``stamp`` (ISO 8601) did so at least ``seconds`` before
    ``moment`` (a stamp that cannot be read: no)."""
    parsed = _parse(stamp) if stamp else None
    return parsed is not None and (moment - parsed).total_seconds() >= seconds


def remove_workspace(settings: Settings, entry: WorkspaceEntry) -> None:
    """The folder (a worktree through ``git worktree remove``) and its runs' port claims."""
    path = Path(entry.path)
    if entry.kind == "worktree":
        remove_worktree(Path(entry.repo) if entry.repo else None, path)
    else:
        shutil.rmtree(path, ignore_errors=True)
    for run in entry.runs:
        release_ports(settings.home, run.id)


def _parse(stamp: str) -> datetime.datetime | None:
    try:
        parsed = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def _mtime(path: Path) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC)
    except OSError:
        return None
