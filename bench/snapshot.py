"""Working-tree snapshots of a generated 20k-file repository (wall-clock medians).

The entry points production uses: :meth:`ShadowRepo.capture` after a shell command (a full
scan) and after a file tool (the named path only), :func:`build_archive` and
:func:`restore_archive` — of a 2k-file snapshot into a clean clone at its base (the 2k files
are written) and into an empty folder (all 20k are). The repository has 20,000 committed files in 400 folders; each
timed capture follows fresh edits, so git really re-hashes them.

References (the TypeScript runtime, which builds a fresh index on every capture): 1.5–3.1 s
with 2k changed files, 0.6–4 s with none (the upper ends are printed as the reference).
Each figure is printed twice: wall-clock, and CPU time of this process plus the git processes
it ran (``_cpu_ms``), which a loaded shared machine disturbs much less (git's waits on the
disk are in the first only).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from baton.snapshots import GitObjects, ShadowRepo, build_archive, restore_archive

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = tuple(
    f"snapshot_{name}_{clock}"
    for name in ("2k_changed", "nothing_changed", "one_file", "archive_2k", "restore_2k", "restore_fresh_20k")
    for clock in ("ms", "cpu_ms")
)
FILES = 20_000
CHANGED = 2_000
RUNS = 5


def _repository(root: Path) -> Path:
    repo = root / "repo"
    for index in range(FILES):
        folder = repo / f"pkg{index // 50:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"module_{index:05d}.py").write_text(f"# module {index}\nVALUE = {index}\n" + "x = 1\n" * 20)
    git = ["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@baton.invalid"]
    env = _git_env()
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "generated"]):
        subprocess.run([*git, *args], check=True, env=env)
    return repo


def _git_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def _edit(repo: Path, round_: int, count: int) -> list[Path]:
    paths = [repo / f"pkg{i // 50:03d}" / f"module_{i:05d}.py" for i in range(0, FILES, FILES // count)][:count]
    for path in paths:
        path.write_text(f"# edited in round {round_}\n" + "y = 2\n" * 20)
    return paths


def _cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _median_ms(
    prepare: Callable[[int], object], work: Callable[[object], object], runs: int = RUNS
) -> tuple[float, float]:
    """Medians of wall-clock and CPU time (this process and the git processes it ran), in ms."""
    walls, cpus = [], []
    for round_ in range(runs + 1):
        argument = prepare(round_)
        start, start_cpu = time.perf_counter(), _cpu()
        work(argument)
        if round_:  # the first is a warm-up
            walls.append((time.perf_counter() - start) * 1000)
            cpus.append((_cpu() - start_cpu) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def _metric(value: float, target: float, reference: float | None) -> Metric:
    return {"value": round(value, 1), "unit": "ms", "target": target, "better": "lower", "reference": reference}


def run() -> dict[str, Metric]:
    with tempfile.TemporaryDirectory(prefix="baton-bench-snapshot-") as tmp:
        root = Path(tmp)
        repo = _repository(root)
        shadow = ShadowRepo(root / "home" / "shadow.git", repo)
        shadow.prepare()
        counter = iter(range(1_000_000))

        changed = _median_ms(lambda r: _edit(repo, next(counter), CHANGED), lambda _: shadow.capture())
        nothing = _median_ms(lambda r: None, lambda _: shadow.capture())
        one = _median_ms(
            lambda r: _edit(repo, next(counter), 1),
            lambda paths: shadow.capture([str(p) for p in paths]),  # type: ignore[attr-defined]
        )
        # A snapshot whose archive holds 2k files (changed against the base commit).
        for round_ in range(2):
            _edit(repo, 10_000 + round_, CHANGED)
            snapshot = shadow.capture()
        assert snapshot is not None and len(snapshot.since_base.modified) == CHANGED
        archive = root / "s.tar.gz"
        archived = _median_ms(lambda r: None, lambda _: build_archive(shadow, snapshot, archive))
        base = GitObjects(shadow.environment)
        clone = root / "clone"
        subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, env=_git_env())

        def reset_clone(round_: int) -> Path:
            # reset, then let git refresh the clone's index: a settled clone, as a user's is
            for args in (["checkout", "-q", "--", "."], ["clean", "-fdq"], ["status", "--porcelain"]):
                subprocess.run(["git", "-C", str(clone), *args], check=True, env=_git_env(), capture_output=True)
            return clone

        restored = _median_ms(
            reset_clone,
            lambda target: restore_archive(archive, target, base=base),  # type: ignore[arg-type]
        )
        fresh = _median_ms(
            lambda r: root / f"restore-{r}",
            lambda target: restore_archive(archive, target, base=base),  # type: ignore[arg-type]
            runs=3,
        )
    results: dict[str, Metric] = {}
    for name, (wall, cpu), target, reference in (
        ("snapshot_2k_changed", changed, 400, 3100),
        ("snapshot_nothing_changed", nothing, 80, 4000),
        ("snapshot_one_file", one, 30, None),
        ("snapshot_archive_2k", archived, 1000, None),
        ("snapshot_restore_2k", restored, 1000, None),
        ("snapshot_restore_fresh_20k", fresh, 5000, None),
    ):
        results[f"{name}_ms"] = _metric(wall, target, reference)
        results[f"{name}_cpu_ms"] = _metric(cpu, target, reference)
    return results
