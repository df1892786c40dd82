"""A run's workspace at start, restart and resume (docs/workspaces.md), for the preparer.

:func:`made_workspace` makes the workspace before the run is recorded (what cannot be made — a
``--base`` that does not exist, a URL that cannot be cloned — refuses the start) and returns the
spec that works in it; :func:`setup_of` is what runs there before the agent starts;
:func:`instructions_of` the repository's instructions its agent is given;
:func:`recreated_workspace` makes a removed worktree or clone again for a resume.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from baton.agents.registry import AgentEntry
from baton.config import Settings
from baton.runs.spec import RunSpec
from baton.runs.workspaces import check_workspace_free
from baton.store import RunRecord, Store
from baton.store.records import new_run_id
from baton.workspaces.create import (
    discard_workspace,
    make_workspace,
    plan_workspace,
    recreate_workspace,
    setup_step,
)
from baton.workspaces.instructions import RepoInstructions, read_instructions
from baton.workspaces.ports import PORT_BLOCK
from baton.workspaces.record import WorkspaceRecord, workspace_of
from baton.workspaces.setup import WorkspaceSetup, skipped_hint

__all__ = ["discarded", "forwarded_ports", "instructions_of", "made_workspace", "recreated_workspace", "setup_of"]


async def made_workspace(settings: Settings, store: Store, spec: RunSpec) -> tuple[RunSpec, WorkspaceRecord]:
    """The run's workspace, made; the spec with its id and the workspace as its ``repo``."""
    run_id = spec.run_id or new_run_id()
    plan = plan_workspace(
        settings,
        spec.repo_url or str(spec.repo),
        kind=spec.workspace,
        base=spec.base,
        ref=spec.ref,
        include_uncommitted=spec.include_uncommitted,
        setup=spec.setup,
    )
    if plan.kind == "in-place":
        await check_workspace_free(store, Path(plan.repo))  # early: before a port block is claimed
    workspace = await asyncio.to_thread(make_workspace, settings, plan, run_id)
    return replace(spec, repo=Path(workspace.path), repo_url=None, run_id=run_id), workspace


async def discarded(settings: Settings, workspace: WorkspaceRecord, run_id: str) -> None:
    """Undo :func:`made_workspace` for a start refused before its run was recorded."""
    await asyncio.to_thread(discard_workspace, settings, workspace, run_id)


def setup_of(settings: Settings, record: RunRecord) -> WorkspaceSetup | None:
    """What runs in the run's workspace before its agent starts (its ``--setup`` or a trusted
    repository's ``.baton/setup``); None for nothing, or a run recorded without a workspace."""
    workspace = workspace_of(record.request)
    if workspace is None:
        return None
    step, skipped = setup_step(settings, workspace, record.id)
    if step is None and skipped is None:
        return None
    hint = skipped_hint(workspace.repo, settings.home / "baton.toml") if skipped is not None else None
    return WorkspaceSetup(step, skipped, settings.run_dir(record.id) / "agent-home", hint)


def forwarded_ports(record: RunRecord) -> tuple[int, ...]:
    """The run's ``BATON_PORT_BASE`` block, which a sandbox of its own forwards from the host
    (baton.sandbox.port_forward); empty for a run recorded without one."""
    workspace = workspace_of(record.request)
    base = workspace.extra.get("port_base") if workspace is not None else None
    return tuple(range(base, base + PORT_BLOCK)) if isinstance(base, int) and base > 0 else ()


def instructions_of(
    settings: Settings, record: RunRecord, entry: AgentEntry, workspace: Path
) -> RepoInstructions | None:
    """The instruction files of the agent's conventions (``entry.instruction_files``) at the run's
    base commit, read through the git of ``workspace`` (where this execution works), given when
    the repository is trusted (baton.workspaces.instructions); None for none, or a run recorded
    without a workspace."""
    recorded = workspace_of(record.request)
    if recorded is None:
        return None
    return read_instructions(settings, recorded, entry.instruction_files, cwd=workspace)


async def recreated_workspace(settings: Settings, record: RunRecord) -> Path | None:
    """The run's worktree or clone made again at its base commit when it is gone (removed by
    ``baton gc``, or by hand); None when it is there, or the run works in place."""
    workspace = workspace_of(record.request)
    if workspace is None or not workspace.separate or Path(workspace.path).is_dir():
        return None
    return await asyncio.to_thread(recreate_workspace, settings, workspace, record.id)
