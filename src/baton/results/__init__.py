"""A run's result as a branch: made, pushed, handed to a pull request, merged (docs/workspaces.md).

- :class:`Results` — ``branch``, ``push``, ``merge`` of a run over a store, and ``at_end``, the
  branch an execution leaves before its final status (baton.runs.executor calls it);
- :func:`commit_archive` — a snapshot committed on its base as a new branch with git plumbing
  (the user's HEAD, index, working tree and other refs are never touched);
- :func:`merge_branch` — fast-forward or merge commit, refused with ``merge_conflict`` or
  ``workspace_dirty`` before anything is written;
- :func:`push_branch`, :func:`run_on_branch` — ``git push`` and ``result.on_branch``.
"""

from __future__ import annotations

from baton.results.branch import Author, Made, check_branch_name, commit_archive
from baton.results.delivery import AUTOMATIC_KINDS, BranchOutcome, Results, default_branch_name, workspace_kind
from baton.results.merge import Merged, merge_branch
from baton.results.message import commit_message, last_agent_message, left_out
from baton.results.push import HookRun, push_branch, run_on_branch
from baton.results.repository import Repository

__all__ = [
    "AUTOMATIC_KINDS",
    "Author",
    "BranchOutcome",
    "HookRun",
    "Made",
    "Merged",
    "Repository",
    "Results",
    "check_branch_name",
    "commit_archive",
    "commit_message",
    "default_branch_name",
    "last_agent_message",
    "left_out",
    "merge_branch",
    "push_branch",
    "run_on_branch",
    "workspace_kind",
]
