"""Per-run memory overhead of an idle run in the baton process.

The production path: ``Baton.start`` with the real Claude Code against the scripted model,
whose answer is delayed so each run sits idle with its agent up and its prompt pending.
Measured in the baton process only (the agent's own ~250 MB live in its process): Python
allocations (tracemalloc) and resident set size, before and after ``RUNS`` idle runs, after
one warm-up run so that imports and one-time caches are not counted. Target ≤ 5 MB a run.
"""

from __future__ import annotations

import asyncio
import gc
import resource
import subprocess
import tempfile
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

from baton.config import Settings
from baton.runs import Baton, RunSpec
from baton.testing import ScriptedModelServer

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = ("idle_run_overhead_mb", "idle_run_rss_mb")
RUNS = 4
KEY = "bench-scripted-key-0123456789"


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README.md").write_text("# idle\n")
    git = ["git", "-C", str(path), "-c", "user.name=bench", "-c", "user.email=bench@baton.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    return path


def _wait_for_prompts(server: ScriptedModelServer, count: int, timeout: float = 60.0) -> None:
    """Until ``count`` runs have sent their prompt to the model (side requests don't count)."""
    deadline = time.monotonic() + timeout
    while len([r for r in server.requests if r.step is not None]) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} runs did not reach the model in {timeout:g} s")
        time.sleep(0.05)


def _rss_mb() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


async def _measure(tmp: Path) -> tuple[float, float]:
    with ScriptedModelServer("plain") as quick, ScriptedModelServer("slow-model") as slow:
        base = Settings.load({"BATON_HOME": str(tmp / "home")})
        async with Baton(replace(base, anthropic_base_url=quick.base_url, anthropic_api_key=KEY)) as warm:
            await warm.run(RunSpec(prompt="warm up", repo=_repo(tmp / "warm")))
        settings = replace(base, anthropic_base_url=slow.base_url, anthropic_api_key=KEY)
        async with Baton(settings) as baton:
            repos = [_repo(tmp / f"repo{i}") for i in range(RUNS)]
            gc.collect()
            before_py, before_rss = tracemalloc.get_traced_memory()[0], _rss_mb()
            handles = [await baton.start(RunSpec(prompt="wait", repo=repo)) for repo in repos]
            await asyncio.to_thread(_wait_for_prompts, slow, RUNS)
            await asyncio.sleep(0.5)
            gc.collect()
            after_py, after_rss = tracemalloc.get_traced_memory()[0], _rss_mb()
            for handle in handles:
                handle.cancel()
            for handle in handles:
                await handle.wait()
    return (after_py - before_py) / 2**20 / RUNS, (after_rss - before_rss) / RUNS


def run() -> dict[str, Metric]:
    tracemalloc.start()
    try:
        with tempfile.TemporaryDirectory(prefix="baton-bench-idle-") as tmp:
            python_mb, rss_mb = asyncio.run(_measure(Path(tmp)))
    finally:
        tracemalloc.stop()
    return {
        "idle_run_overhead_mb": {
            "value": round(python_mb, 3),
            "unit": "MB/run",
            "target": 5.0,
            "better": "lower",
            "reference": None,
        },
        "idle_run_rss_mb": {
            "value": round(rss_mb, 3),
            "unit": "MB/run",
            "target": 5.0,
            "better": "lower",
            "reference": None,
        },
    }
