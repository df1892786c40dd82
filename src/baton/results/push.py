"""Pushing a run's branch, and the ``result.on_branch`` command run after it (a pull request).

``git push REMOTE refs/heads/B:refs/heads/B`` runs as the user (their credentials and ssh
configuration; never a prompt). A refusal is ``push_failed`` with git's own message.

``result.on_branch`` is a shell command run in the repository with ``BATON_RUN_ID``,
``BATON_BRANCH``, ``BATON_BASE`` (the base commit), ``BATON_COMMIT`` and ``BATON_REMOTE`` in its
environment, e.g. ``gh pr create --fill --head "$BATON_BRANCH"``; a URL on the last line it
prints is the run's ``pull_request_url``.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from typing import Final

from baton.errors import RefusedError
from baton.results.repository import Repository, user_environment
from baton.snapshots import GitFailed

__all__ = ["HOOK_TIMEOUT_SECONDS", "HookRun", "push_branch", "run_on_branch"]

HOOK_TIMEOUT_SECONDS: Final = 300.0
_URL: Final = re.compile(r"^https?://\S+$")
_TAIL: Final = 4000  # characters of a failing hook's output kept


def push_branch(repo: Repository, branch: str, remote: str) -> None:
    """Push ``branch`` to ``remote``; ``push_failed`` with git's message when it refuses."""
    ref = f"refs/heads/{branch}"
    try:
        repo.user_git("push", "--porcelain", remote, f"{ref}:{ref}")
    except GitFailed as exc:
        message = exc.stderr.strip() or str(exc)
        raise RefusedError(
            "push_failed",
            f"git push {remote} {branch} failed: {message[-_TAIL:]}",
            details={"remote": remote, "branch": branch, "stderr": message[-_TAIL:]},
        ) from exc


@dataclass(frozen=True)
class HookRun:
    """What ``result.on_branch`` did: its exit status, the URL it printed last, its output's tail."""

    command: str
    returncode: int
    url: str | None
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run_on_branch(
    repo: Repository, command: str, *, run_id: str, branch: str, base: str | None, commit: str, remote: str | None
) -> HookRun:
    """Run the hook (``sh -c COMMAND``) in the repository's work tree; its URL is its last stdout line's."""
    env = user_environment(
        {
            "BATON_RUN_ID": run_id,
            "BATON_BRANCH": branch,
            "BATON_BASE": base or "",
            "BATON_COMMIT": commit,
            "BATON_REMOTE": remote or "",
        }
    )
    try:
        done = subprocess.run(
            ["sh", "-c", command],
            cwd=repo.work_tree,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=HOOK_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return HookRun(command, -1, None, f"timed out after {HOOK_TIMEOUT_SECONDS:g} s")
    except OSError as exc:
        return HookRun(command, -1, None, f"cannot run sh: {exc}")
    stdout = done.stdout.decode("utf-8", "replace")
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    url = lines[-1] if done.returncode == 0 and lines and _URL.match(lines[-1]) else None
    output = (stdout + done.stderr.decode("utf-8", "replace"))[-_TAIL:]
    return HookRun(command, done.returncode, url, output)
