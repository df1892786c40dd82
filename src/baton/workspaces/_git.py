"""git as the workspaces run it: baton's clean environment (no ``GIT_*`` of the caller, no
global or system configuration), the user's hooks off, and a failure as a :class:`BatonError`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from baton.errors import WorkspaceError
from baton.snapshots import GitFailed, clean_environment, run_git

__all__ = ["GitFailed", "git", "git_env", "git_ok", "git_text"]

# Hooks are the user's code: the worktree a run gets is made without running them (a setup
# script is how a repository prepares a workspace, docs/workspaces.md).
_NO_HOOKS = ("-c", "core.hooksPath=/dev/null")


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return clean_environment({"GIT_OPTIONAL_LOCKS": "0", **(extra or {})})


def git(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None, code: str = "workspace_failed"
) -> bytes:
    """``git ARGS`` in ``cwd``; a failure is ``WorkspaceError(code)`` with git's message."""
    try:
        return run_git([*_NO_HOOKS, *args], env if env is not None else git_env(), cwd=cwd)
    except GitFailed as exc:
        raise WorkspaceError(code, str(exc), details={"stderr": exc.stderr.strip()[-2000:]}) from exc


def git_text(args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None) -> str | None:
    """``git ARGS``'s stdout stripped, or None when it fails (a question, not an action)."""
    try:
        return run_git([*_NO_HOOKS, *args], env if env is not None else git_env(), cwd=cwd).decode().strip()
    except GitFailed:
        return None


def git_ok(args: Sequence[str], *, cwd: Path) -> bool:
    return git_text(args, cwd=cwd) is not None
