"""The repository a run's branch lives in, and the two ways baton runs git there.

- **plumbing** (:meth:`Repository.git`): baton's clean environment (no ``GIT_*`` of the caller,
  no system or global configuration: the user's hooks, filters and aliases never run), with
  ``GIT_DIR`` the repository's common git directory and no work tree. Building a branch only
  writes objects and one new ref this way; HEAD, the index and the working tree are never read
  as a work tree would be, so they cannot change.
- **as the user** (:meth:`Repository.user_git`): ``git push`` and ``git merge`` need what the
  user configured (credentials, ssh, their identity for a merge commit), so they run with the
  caller's environment minus its ``GIT_*`` variables, never prompting on a terminal.

Every failure of git is :class:`~baton.snapshots._git.GitFailed` here; the callers translate it
into the error a user sees.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from baton.errors import UsageError
from baton.snapshots import GitFailed, clean_environment, run_git

__all__ = ["Repository", "user_environment"]


def user_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without its ``GIT_*`` variables, never prompting; plus ``extra``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"
    if extra:
        env.update(extra)
    return env


@dataclass(frozen=True)
class Repository:
    """A git repository with a work tree (the user's, a clone's) as baton addresses it."""

    work_tree: Path
    git_dir: Path  # the common git directory (a linked worktree shares its repository's)
    object_format: str

    @classmethod
    def at(cls, path: Path) -> Repository:
        """The repository at ``path`` (a work tree, or a linked worktree of one); ``invalid_argument`` otherwise."""
        path = Path(path)
        if not path.is_dir():
            raise UsageError("invalid_argument", f"{path} is not a directory")
        env = clean_environment()
        try:
            out = run_git(["rev-parse", "--path-format=absolute", "--git-common-dir", "--show-toplevel"], env, cwd=path)
            object_format = run_git(["rev-parse", "--show-object-format"], env, cwd=path).decode().strip()
        except GitFailed as exc:
            raise UsageError("invalid_argument", f"{path} is not a git repository with a work tree") from exc
        git_dir, top = out.decode("utf-8", "surrogateescape").splitlines()[:2]
        return cls(Path(top), Path(git_dir), object_format or "sha1")

    @property
    def zero(self) -> str:
        return "0" * (64 if self.object_format == "sha256" else 40)

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Baton's clean environment aimed at this repository's git directory (no work tree)."""
        return clean_environment({"GIT_DIR": str(self.git_dir), **(extra or {})})

    def git(
        self, *args: str, input: bytes | None = None, extra: Mapping[str, str] | None = None, ok: tuple[int, ...] = (0,)
    ) -> bytes:
        """Plumbing in this repository (see the module)."""
        return run_git(list(args), self.environment(extra), input=input, cwd=self.git_dir, ok_codes=ok)

    def user_git(
        self, *args: str, extra: Mapping[str, str] | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        """git in the work tree, as the user runs it (see the module)."""
        try:
            done = subprocess.run(
                ["git", *args],
                cwd=self.work_tree,
                env=user_environment(extra),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                check=False,
            )
        except OSError as exc:
            raise GitFailed(list(args), -1, f"cannot run git: {exc}") from exc
        if check and done.returncode != 0:
            raise GitFailed(list(args), done.returncode, done.stderr.decode("utf-8", "replace"))
        return done

    def resolve(self, rev: str) -> str | None:
        """The object ``rev`` names (``…^{commit}`` to insist on a commit), or None."""
        out = self.git("rev-parse", "--verify", "--quiet", "--end-of-options", rev, ok=(0, 1, 128))
        found = out.decode().strip()
        return found or None

    def branch_commit(self, name: str) -> str | None:
        """The commit of branch ``name`` (``refs/heads/NAME``), or None."""
        return self.resolve(f"refs/heads/{name}^{{commit}}")

    def current_branch(self) -> str | None:
        """The branch the work tree has checked out, or None (detached, or not a branch)."""
        out = self.user_git("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        return out.stdout.decode().strip() if out.returncode == 0 else None

    def checkouts(self) -> dict[str, Path]:
        """Every branch checked out in a work tree of this repository → that work tree (the
        main one first, as ``git worktree list`` gives them)."""
        out = self.git("worktree", "list", "--porcelain", "-z")
        found: dict[str, Path] = {}
        path: Path | None = None
        for field in out.decode("utf-8", "surrogateescape").split("\0"):
            if field.startswith("worktree "):
                path = Path(field.removeprefix("worktree "))
            elif field.startswith("branch refs/heads/") and path is not None:
                found.setdefault(field.removeprefix("branch refs/heads/"), path)
        return found

    def is_ancestor(self, older: str, newer: str) -> bool:
        """Whether commit ``older`` is ``newer`` or one of its ancestors."""
        try:
            self.git("merge-base", "--is-ancestor", older, newer)
        except GitFailed as exc:
            if exc.returncode == 1:
                return False
            raise
        return True
