"""``baton merge``: a run's branch merged into the user's branch, only when asked.

The merge is worked out first without touching anything: a fast-forward when the branch
descends from the target, else ``git merge-tree --write-tree`` (git ≥ 2.38) computes the merged
tree and the conflicting paths. A conflict is refused with ``merge_conflict`` (the paths in
``details.paths``); uncommitted changes (staged, unstaged or untracked) in a file the merge would
change are refused with ``workspace_dirty``. Nothing is written before both checks pass.

Into a branch checked out in one of the repository's work trees (by default the one checked out
where the run's branch lives, else in the main work tree), ``git merge`` then runs there as the
user would run it (their identity, that working tree updated); into a branch checked out
nowhere (``--into``) only its ref moves (``update-ref`` with its old value, so a concurrent
change is not overwritten).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Literal

from baton.errors import NotFoundError, RefusedError, UsageError
from baton.results.branch import Author
from baton.results.repository import Repository
from baton.snapshots import GitFailed

__all__ = ["Merged", "merge_branch"]

MergeKind = Literal["fast-forward", "merge", "up-to-date"]


@dataclass(frozen=True)
class Merged:
    branch: str
    into: str
    kind: MergeKind
    before: str
    commit: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "branch": self.branch,
            "into": self.into,
            "kind": self.kind,
            "before": self.before,
            "commit": self.commit,
        }


def merge_branch(repo: Repository, branch: str, into: str | None, fallback: Author) -> Merged:
    """Merge ``branch`` into ``into`` (default: the checked-out branch); see the module."""
    source = repo.branch_commit(branch)
    if source is None:
        raise NotFoundError("branch_not_found", f"the branch {branch} is not in {repo.work_tree}")
    checkouts = repo.checkouts()
    # A detached work tree (a run's worktree): the branch of the repository's main work tree.
    current = repo.current_branch() or next(iter(checkouts), None)
    target = into or current
    if target is None:
        raise UsageError("invalid_argument", f"{repo.work_tree} has no branch checked out; name one with --into")
    before = repo.branch_commit(target)
    if before is None:
        raise UsageError("invalid_argument", f"there is no branch {target} in {repo.work_tree}")
    if repo.is_ancestor(source, before):
        return Merged(branch, target, "up-to-date", before, before)
    fast_forward = repo.is_ancestor(before, source)
    tree = (
        repo.git("rev-parse", f"{source}^{{tree}}").decode().strip()
        if fast_forward
        else _merged_tree(repo, before, source)
    )
    where = checkouts.get(target)
    checked_out = where is not None
    if where is not None:  # the merge updates the work tree that has the branch checked out
        repo = replace(repo, work_tree=where)
        _refuse_dirty(repo, _changed(repo, before, tree))
    identity = {} if _has_identity(repo) else fallback.environment()
    if checked_out:
        flags = ["--ff-only"] if fast_forward else ["--no-ff", "--no-edit"]
        done = repo.user_git("merge", *flags, f"refs/heads/{branch}", extra=identity, check=False)
        if done.returncode != 0:
            _abort(repo)
            raise RefusedError(
                "merge_conflict",
                f"git merge {branch} failed; nothing was changed: {done.stderr.decode('utf-8', 'replace').strip()}",
                details={"paths": []},
            )
        commit = repo.branch_commit(target) or source
        return Merged(branch, target, "fast-forward" if fast_forward else "merge", before, commit)
    commit = source
    if not fast_forward:
        message = f"Merge branch '{branch}' into {target}\n"
        made = repo.user_git("commit-tree", tree, "-p", before, "-p", source, "-m", message.strip(), extra=identity)
        commit = made.stdout.decode().strip()
    try:
        repo.git("update-ref", "-m", f"baton merge {branch}", f"refs/heads/{target}", commit, before)
    except GitFailed as exc:
        raise RefusedError("merge_conflict", f"the branch {target} moved while merging; nothing was changed") from exc
    return Merged(branch, target, "fast-forward" if fast_forward else "merge", before, commit)


def _merged_tree(repo: Repository, ours: str, theirs: str) -> str:
    out = repo.git("merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", ours, theirs, ok=(0, 1))
    fields = [field for field in out.split(b"\0") if field]
    tree = fields[0].decode().strip() if fields else ""
    conflicts = sorted({os.fsdecode(field) for field in fields[1:]})
    if conflicts:
        raise RefusedError(
            "merge_conflict",
            f"merging would conflict in {', '.join(conflicts[:20])}; nothing was changed",
            details={"paths": conflicts},
        )
    return tree


def _changed(repo: Repository, old: str, new_tree: str) -> set[str]:
    out = repo.git("diff-tree", "-r", "--name-only", "--no-renames", "-z", old, new_tree)
    return {os.fsdecode(path) for path in out.split(b"\0") if path}


def _refuse_dirty(repo: Repository, involved: set[str]) -> None:
    """``workspace_dirty`` when the working tree has uncommitted changes in ``involved`` paths.

    ``GIT_OPTIONAL_LOCKS=0``: ``git status`` must not refresh (rewrite) the user's index.
    """
    done = repo.user_git(
        "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", extra={"GIT_OPTIONAL_LOCKS": "0"}
    )
    dirty = {os.fsdecode(record[3:]) for record in done.stdout.split(b"\0") if len(record) > 3}
    touched = sorted(path for path in dirty if path in involved or any(path.startswith(p + "/") for p in involved))
    if touched:
        raise RefusedError(
            "workspace_dirty",
            f"uncommitted changes in files the merge would change: {', '.join(touched[:20])}; "
            "commit or move them first",
            details={"files": touched},
        )


def _has_identity(repo: Repository) -> bool:
    return repo.user_git("var", "GIT_COMMITTER_IDENT", check=False).returncode == 0


def _abort(repo: Repository) -> None:
    if repo.user_git("rev-parse", "-q", "--verify", "MERGE_HEAD", check=False).returncode == 0:
        repo.user_git("merge", "--abort", check=False)
