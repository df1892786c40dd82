"""Making a run's workspace before it is recorded, and making it again for a resume or an import.

:func:`plan_workspace` checks what was asked against the repository (nothing is written) and
chooses the kind: a local git repository's top gets a **worktree**, a URL or a bare repository a
**clone**, anything else works **in place** — unless ``--workspace`` (or the configuration)
says otherwise. :func:`make_workspace` makes it under ``BATON_HOME/workspaces/<run id>``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.config import Settings, check_workspace_kind
from baton.errors import UsageError
from baton.workspaces._git import git, git_text
from baton.workspaces.mirror import clone_from_mirror, is_git_url, resolve_clone_ref
from baton.workspaces.ports import claim_ports, release_ports
from baton.workspaces.record import WorkspaceRecord
from baton.workspaces.setup import SETUP_FILE, SetupStep, read_setup_script
from baton.workspaces.trust import is_trusted
from baton.workspaces.worktree import (
    GitRepository,
    add_worktree,
    carry_uncommitted,
    copy_included,
    remove_worktree,
    resolve_commit,
)

__all__ = ["WorkspacePlan", "discard_workspace", "make_workspace", "plan_workspace", "recreate_workspace", "setup_step"]


@dataclass(frozen=True)
class WorkspacePlan:
    kind: str
    repo: str  # the user's repository (resolved path) or the URL to clone
    base: str | None  # --base / --ref as given
    include_uncommitted: bool
    setup: str | None  # --setup CMD


def plan_workspace(
    settings: Settings,
    repo: str,
    *,
    kind: str | None,
    base: str | None = None,
    ref: str | None = None,
    include_uncommitted: bool = False,
    setup: str | None = None,
) -> WorkspacePlan:
    """The workspace a run asking for ``kind`` (None: the configured one, else by the repository)
    in ``repo`` gets; ``invalid_argument`` for what cannot be."""
    if kind is not None:
        check_workspace_kind(kind)
    if base is not None and ref is not None and base != ref:
        raise UsageError("invalid_argument", "--base and --ref name the same thing; give one")
    base = base if base is not None else ref
    if is_git_url(repo):
        if kind not in (None, "clone"):
            raise UsageError("invalid_argument", f"--repo {repo} is a URL: it can only be cloned (--workspace clone)")
        chosen = "clone"
        target = repo
    else:
        path = Path(repo).expanduser().absolute()
        if not path.is_dir():
            raise UsageError("invalid_argument", f"--repo {path} is not a directory")
        found = GitRepository.probe(path)
        target = str(found.path)
        chosen = _local_kind(found, kind, settings.workspace)
    if chosen == "in-place" and base is not None:
        raise UsageError(
            "invalid_argument", "--base needs a worktree or a clone: an in-place run works on what is there"
        )
    if include_uncommitted and chosen != "worktree":
        raise UsageError("invalid_argument", "--include-uncommitted applies to a worktree of a local repository")
    return WorkspacePlan(chosen, target, base, include_uncommitted, setup)


def _local_kind(found: GitRepository, asked: str | None, configured: str | None) -> str:
    if found.kind == "bare":
        if asked in ("worktree", "in-place"):
            raise UsageError(
                "invalid_argument", f"{found.path} is a bare repository (no working tree): use --workspace clone"
            )
        return "clone"
    if asked is not None:
        if asked != "in-place" and found.kind == "none":
            raise UsageError("invalid_argument", f"--workspace {asked}: {found.path} is not a git repository")
        if asked != "in-place" and found.kind == "subdirectory":
            raise UsageError(
                "invalid_argument",
                f"--workspace {asked}: {found.path} is inside a repository, not its top "
                "(pass the top, or --workspace in-place)",
            )
        return asked
    if found.kind != "work_tree":
        return "in-place"
    return configured or "worktree"


def make_workspace(settings: Settings, plan: WorkspacePlan, run_id: str) -> WorkspaceRecord:
    """The workspace of ``run_id``, made (a worktree or a clone) or named (in place)."""
    port_base = claim_ports(settings.home, run_id)
    if plan.kind == "in-place":
        head = git_text(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd=Path(plan.repo))
        return WorkspaceRecord("in-place", plan.repo, head or None, plan.repo, {"port_base": port_base})
    dest = settings.workspace_dir(run_id)
    extra: dict[str, Any] = {"port_base": port_base}
    try:
        if plan.kind == "worktree":
            repo = Path(plan.repo)
            commit = resolve_commit(repo, plan.base or "HEAD")
            add_worktree(repo, dest, commit)
            if plan.include_uncommitted:
                if plan.base is not None and commit != resolve_commit(repo, "HEAD"):
                    raise UsageError(
                        "invalid_argument", "--include-uncommitted carries changes against HEAD: no --base"
                    )
                extra["include_uncommitted"] = True
                extra["carried"] = carry_uncommitted(repo, dest)
            extra["included"] = copy_included(repo, dest)
        else:
            mirror = clone_from_mirror(settings.home, plan.repo, dest, plan.base)
            commit = resolve_clone_ref(dest, plan.base)
            git(["checkout", "--quiet", "--detach", commit], cwd=dest)
            extra["mirror"] = str(mirror)
            if plan.base is not None:
                extra["ref"] = plan.base
    except BaseException:
        remove_made(settings, plan.kind, plan.repo, dest)
        raise
    submodules = _submodules(dest)
    if submodules:
        extra["submodules"] = submodules  # recorded, not checked out (docs/workspaces.md)
    if plan.setup is not None:
        extra["setup"] = {"source": "option", "command": plan.setup}
    return WorkspaceRecord(plan.kind, str(dest), commit, plan.repo, extra)


def discard_workspace(settings: Settings, record: WorkspaceRecord, run_id: str) -> None:
    """Undo :func:`make_workspace` for a run that was refused before it was recorded."""
    if record.separate:
        remove_made(settings, record.kind, record.repo, Path(record.path))
    release_ports(settings.home, run_id)


def remove_made(settings: Settings, kind: str, repo: str, dest: Path) -> None:
    if kind == "worktree":
        remove_worktree(Path(repo), dest)
    elif kind == "clone":
        shutil.rmtree(dest, ignore_errors=True)


def recreate_workspace(settings: Settings, record: WorkspaceRecord, run_id: str) -> Path:
    """A worktree or clone that was removed, made again at its base commit (its files then come
    from the run's latest snapshot); the folder: where it was when that is under this home's
    ``workspaces/``, else (another home's path) under this home's."""
    recorded = Path(record.path)
    dest = recorded if (settings.home / "workspaces") in recorded.parents else settings.workspace_dir(run_id)
    if dest.exists():
        return dest
    commit = record.base_commit or "HEAD"
    if record.kind == "worktree":
        repo = Path(record.repo)
        if not repo.is_dir():
            raise UsageError(
                "invalid_argument", f"the run's repository {repo} is gone: pass --repo DIR to restore it elsewhere"
            )
        add_worktree(repo, dest, resolve_commit(repo, commit, option="base commit"), again=True)
    else:
        clone_from_mirror(settings.home, record.repo, dest, record.base_commit)
        git(["checkout", "--quiet", "--detach", resolve_clone_ref(dest, commit)], cwd=dest)
    return dest


def setup_step(settings: Settings, record: WorkspaceRecord, run_id: str) -> tuple[SetupStep | None, str | None]:
    """What runs before the run's agent starts, and why a repository's ``.baton/setup`` did not
    (None when nothing was skipped)."""
    env = {
        "BATON_PORT_BASE": str(record.extra.get("port_base") or ""),
        "BATON_WORKSPACE": record.path,
        "BATON_BASE_COMMIT": record.base_commit or "",
    }
    cwd = Path(record.path)
    asked = record.extra.get("setup")
    if isinstance(asked, dict) and isinstance(asked.get("command"), str):
        return SetupStep(cwd, "option", command=asked["command"], env=env), None
    script = read_setup_script(cwd, record.base_commit)
    if script is None:
        return None, None
    if not is_trusted(settings, record.repo):
        if settings.workspace_untrusted_setup == "ask":  # a gate shows the script first (untrusted_setup = "ask")
            return SetupStep(cwd, "gate", script=script, env=env), None
        return None, f"{SETUP_FILE} not run: {record.repo} is not a trusted repository ([workspace] trusted)"
    return SetupStep(cwd, "trusted", script=script, env=env), None


def _submodules(dest: Path) -> list[str]:
    if not (dest / ".gitmodules").is_file():
        return []
    listed = git_text(["config", "--file", ".gitmodules", "--get-regexp", r"^submodule\..*\.path$"], cwd=dest) or ""
    return sorted(line.split(" ", 1)[1] for line in listed.splitlines() if " " in line)
