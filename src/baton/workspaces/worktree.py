"""A run's worktree: ``git worktree add --detach`` of the user's repository at the base commit.

The user's repository gains the worktree's admin entry (``.git/worktrees/<run id>``) and the
objects of carried-over changes; its ``HEAD``, index, working tree, stash and refs are never
written. ``--include-uncommitted`` hashes the user's changes through a *copy* of their index
(``GIT_INDEX_FILE``) and writes them into the worktree: what was staged is staged there, what
was not is not, and new files are new files. ``.baton/worktree-include`` lists untracked files
(gitignore-style patterns, e.g. ``.env``) copied over as they are.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from baton.errors import UsageError, WorkspaceError
from baton.workspaces._git import git, git_env, git_text

__all__ = ["GitRepository", "add_worktree", "carry_uncommitted", "copy_included", "remove_worktree", "resolve_commit"]

INCLUDE_FILE = ".baton/worktree-include"


@dataclass(frozen=True)
class GitRepository:
    """What baton needs to know of a local path: is it a work tree's top, a bare repository, neither."""

    path: Path
    kind: str  # "work_tree" (the top of one), "subdirectory" (inside one), "bare", "none"

    @classmethod
    def probe(cls, path: Path) -> GitRepository:
        path = path.resolve()
        if git_text(["rev-parse", "--is-bare-repository"], cwd=path) == "true":
            return cls(path, "bare")
        top = git_text(["rev-parse", "--show-toplevel"], cwd=path)
        if top is None:
            return cls(path, "none")
        return cls(path, "work_tree" if Path(top).resolve() == path else "subdirectory")


def resolve_commit(repo: Path, ref: str, *, option: str = "--base") -> str:
    """The commit ``ref`` names in ``repo``, else ``ref_not_found``."""
    commit = git_text(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], cwd=repo)
    if not commit:
        raise WorkspaceError("ref_not_found", f"{option} {ref}: no such commit in {repo}", details={"ref": ref})
    return commit


def add_worktree(repo: Path, dest: Path, commit: str, *, again: bool = False) -> None:
    """``git worktree add --detach DEST COMMIT`` (its admin entry named after ``dest``); ``again``:
    the folder of a worktree git still lists was deleted, and this one takes its place."""
    if dest.exists():
        raise UsageError("invalid_argument", f"{dest} exists already")
    dest.parent.mkdir(parents=True, exist_ok=True)
    git(["worktree", "add", "--quiet", *(["--force"] if again else []), "--detach", str(dest), commit], cwd=repo)


def remove_worktree(repo: Path | None, dest: Path) -> None:
    """The worktree and its admin entry (``git worktree remove --force``, then ``prune``); just
    the folder when its repository is gone."""
    if (
        repo is not None
        and repo.is_dir()
        and dest.exists()
        and git_text(["worktree", "remove", "--force", "--force", str(dest)], cwd=repo) is not None
    ):
        git_text(["worktree", "prune"], cwd=repo)
        return
    shutil.rmtree(dest, ignore_errors=True)
    if repo is not None and repo.is_dir():
        git_text(["worktree", "prune"], cwd=repo)


def carry_uncommitted(repo: Path, dest: Path) -> dict[str, list[str]]:
    """The user's staged, unstaged and untracked-but-not-ignored changes, into the worktree
    ``dest`` (at the user's ``HEAD``): the paths carried, by kind. The user's index is only read."""
    user_index = Path(git(["rev-parse", "--git-path", "index"], cwd=repo).decode().strip())
    user_index = user_index if user_index.is_absolute() else repo / user_index
    with tempfile.TemporaryDirectory(prefix="baton-carry-") as scratch:
        # Copies of the user's index: even ``write-tree`` writes the index it reads (its cache tree).
        staged_index, index = Path(scratch) / "staged", Path(scratch) / "index"
        if user_index.is_file():
            shutil.copyfile(user_index, staged_index)
            shutil.copyfile(user_index, index)
        staged_tree = git(["write-tree"], cwd=repo, env=git_env({"GIT_INDEX_FILE": str(staged_index)})).decode().strip()
        env = git_env({"GIT_INDEX_FILE": str(index)})
        git(["add", "--all", "--", "."], cwd=repo, env=env)
        work_tree = git(["write-tree"], cwd=repo, env=env).decode().strip()
    inside = git_env()
    # The worktree's index and files become the user's working tree, then its index the user's index.
    git(["read-tree", "--reset", "-u", work_tree], cwd=dest, env=inside)
    git(["read-tree", staged_tree], cwd=dest, env=inside)
    head = git(["rev-parse", "HEAD^{tree}"], cwd=dest).decode().strip()
    return {
        "staged": _names(dest, ["diff", "--cached", "--name-only", "-z", head]),
        "unstaged": _names(dest, ["diff", "--name-only", "-z"]),
        "untracked": _names(dest, ["ls-files", "--others", "--exclude-standard", "-z"]),
    }


def copy_included(repo: Path, dest: Path) -> list[str]:
    """Untracked files of ``repo`` matching ``.baton/worktree-include`` (its working tree's copy),
    copied to the same place in ``dest``; the paths copied."""
    patterns = repo / INCLUDE_FILE
    if not patterns.is_file():
        return []
    listed = git(["ls-files", "--others", "--ignored", f"--exclude-from={patterns}", "-z"], cwd=repo).decode(
        errors="surrogateescape"
    )
    copied = []
    for name in (item for item in listed.split("\0") if item):
        source, target = repo / name, dest / name
        if target.exists() or target.is_symlink():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(source.readlink())
        elif source.is_file():
            shutil.copy2(source, target)
        else:
            continue
        copied.append(name)
    return copied


def _names(cwd: Path, args: list[str]) -> list[str]:
    out = git(args, cwd=cwd).decode(errors="surrogateescape")
    return sorted(item for item in out.split("\0") if item)
