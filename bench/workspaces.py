"""Workspaces of a generated 20k-file repository (wall-clock medians), and runs side by side.

- ``worktree_create_ms``: :func:`make_workspace` of a worktree (what ``Baton.start`` does before
  recording a run: the base resolved, ``git worktree add --detach``, the port block, the
  ``.baton/worktree-include`` and submodule checks) — measured alternately with a plain
  ``git worktree add --detach`` of the same repository (``worktree_plain_ms``, its reference);
  target 1.5 × the plain figure (``worktree_create_ratio`` ≤ 1.5).
- ``clone_from_mirror_ms``: the second and later clones of the same repository by ``file://``
  URL through the mirror cache (fetch the mirror, clone sharing its objects, check out); ≤ 2 s.
- ``worktree_disk_mb``: disk used by one worktree (files and the worktree's index; git's objects
  are shared), target 1.2 × the checkout's files (``reference``: those files).
- ``parallel_runs_4_overhead``: four scripted runs (Claude Code on ``write-prompt-file``) started
  at once in four worktrees of one repository, wall time over one such run's: ≤ 4 (one after
  another), on a shared 2-core machine.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from baton.config import Settings
from baton.workspaces.create import make_workspace, plan_workspace
from baton.workspaces.gc import disk_usage
from baton.workspaces.worktree import remove_worktree

from . import Metric
from .snapshot import _git_env, _repository

__all__ = ["METRICS", "run"]

METRICS = (
    "worktree_create_ms",
    "worktree_plain_ms",
    "worktree_create_ratio",
    "clone_from_mirror_ms",
    "worktree_disk_mb",
    "parallel_runs_4_overhead",
)
RUNS = 5


def _metric(value: float, unit: str, target: float, reference: float | None) -> Metric:
    return {
        "value": round(value, 3),
        "unit": unit,
        "target": round(target, 3),
        "better": "lower",
        "reference": reference,
    }


def _worktrees(settings: Settings, repo: Path, root: Path) -> tuple[float, float, float]:
    ours, plain = [], []
    plan = plan_workspace(settings, str(repo), kind="worktree")
    for index in range(RUNS + 1):  # the first of each is a warm-up
        start = time.perf_counter()
        record = make_workspace(settings, plan, f"run_bench{index}")
        elapsed = time.perf_counter() - start
        if index:
            ours.append(elapsed)
        disk = disk_usage(Path(record.path))
        remove_worktree(repo, Path(record.path))
        target = root / f"plain{index}"
        start = time.perf_counter()
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(target), "HEAD"],
            check=True,
            env=_git_env(),
        )
        elapsed = time.perf_counter() - start
        if index:
            plain.append(elapsed)
        remove_worktree(repo, target)
    return statistics.median(ours) * 1000, statistics.median(plain) * 1000, disk / 1e6


def _clones(settings: Settings, bare: Path) -> float:
    plan = plan_workspace(settings, f"file://{bare}", kind=None)
    make_workspace(settings, plan, "run_clone_first")  # makes the mirror
    times = []
    for index in range(3):
        start = time.perf_counter()
        make_workspace(settings, plan, f"run_clone{index}")
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def _runs(settings: Settings, repo: Path, count: int) -> float:
    from baton.runs import Baton, RunSpec

    async with Baton(settings, concurrency=count) as baton:
        start = time.perf_counter()
        handles = [
            await baton.start(
                RunSpec(prompt=f"file{i}.txt", repo=repo, scenario="write-prompt-file", permission_mode="acceptEdits")
            )
            for i in range(count)
        ]
        outcomes = await asyncio.gather(*(handle.wait() for handle in handles))
        elapsed = time.perf_counter() - start
    assert all(outcome.status == "finished" for outcome in outcomes), outcomes
    return elapsed


def run() -> dict[str, Metric]:
    with tempfile.TemporaryDirectory(prefix="baton-bench-workspaces-") as tmp:
        root = Path(tmp)
        repo = _repository(root)
        settings = Settings.load({"BATON_HOME": str(root / "home")})
        ours, plain, disk = _worktrees(settings, repo, root)
        checkout = disk_usage(repo) - disk_usage(repo / ".git")
        bare = root / "upstream.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True, env=_git_env())
        clone = _clones(settings, bare)
        small = _repository_small(root / "small")
        one = asyncio.run(_runs(Settings.load({"BATON_HOME": str(root / "home-1")}), small, 1))
        four = asyncio.run(_runs(Settings.load({"BATON_HOME": str(root / "home-4")}), small, 4))
    return {
        "worktree_create_ms": _metric(ours, "ms", plain * 1.5, round(plain, 3)),
        "worktree_plain_ms": _metric(plain, "ms", plain * 1.5, None),
        "worktree_create_ratio": _metric(ours / plain, "x", 1.5, None),
        "clone_from_mirror_ms": _metric(clone, "ms", 2000.0, None),
        "worktree_disk_mb": _metric(disk, "MB", checkout / 1e6 * 1.2, round(checkout / 1e6, 3)),
        "parallel_runs_4_overhead": _metric(four / one, "x", 4.0, round(one, 3)),
    }


def _repository_small(path: Path) -> Path:
    path.mkdir(parents=True)
    git = ["git", "-C", str(path), "-c", "user.name=bench", "-c", "user.email=bench@baton.invalid"]
    (path / "README.md").write_text("# bench\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "one"]):
        subprocess.run([*git, *args], check=True, env=_git_env())
    return path
