"""What running runs as DBOS workflows costs a process (docs/runs.md "Workflows").

- ``dbos_import_s``: ``import dbos`` in a fresh interpreter (every executing ``baton`` process
  pays it once, beside the agents' SDKs).
- ``dbos_launch_ms``: :func:`baton.runs.workflows.acquire` on a fresh ``BATON_HOME`` — the WAL
  switch, DBOS's migrations of its SQLite file, launch — then release (destroy).
- ``dbos_run_overhead_ms``: one run through the production path minus the agent:
  ``DurableRuntime.submit`` of an execution that returns at once → its outcome (enqueue on the
  process's queue, dequeue, the workflow and its step recorded), median of 20.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from baton.config import Settings
from baton.runs.spec import RunOutcome
from baton.runs.workflows import acquire, release
from baton.store import Store

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = ("dbos_import_s", "dbos_launch_ms", "dbos_run_overhead_ms")


def _import_seconds() -> float:
    times = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import dbos"], check=True)
        times.append(time.perf_counter() - started)
    bare = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - started)
    return statistics.median(times) - statistics.median(bare)


async def _launch_and_runs(root: Path) -> tuple[float, float]:
    launches = []
    for index in range(5):
        settings = Settings(home=root / f"launch-{index}")
        settings.home.mkdir(parents=True)
        started = time.perf_counter()
        runtime = await acquire(settings, 2)
        launches.append(time.perf_counter() - started)
        await release(runtime)
    settings = Settings(home=root / "runs")
    settings.home.mkdir(parents=True)
    store = Store.open(settings.resolved_database_url)
    runtime = await acquire(settings, 2)
    overheads = []
    try:
        for _ in range(20):
            record = await store.create_run(agent="claude")

            async def execute(run_id: str = record.id) -> RunOutcome:
                return RunOutcome(run_id, "finished")

            async def adopt(run_id: str) -> Callable[[], Awaitable[RunOutcome]]:
                raise RuntimeError("not adopted in this benchmark")

            started = time.perf_counter()
            done = await runtime.submit(record.id, execute, store=store, adopt=adopt)
            await done
            overheads.append(time.perf_counter() - started)
    finally:
        await release(runtime)
        await store.aclose()
    return statistics.median(launches), statistics.median(overheads)


def run() -> dict[str, Metric]:
    imported = _import_seconds()
    with tempfile.TemporaryDirectory(prefix="baton-bench-workflows-") as tmp:
        launch, overhead = asyncio.run(_launch_and_runs(Path(tmp)))
    return {
        "dbos_import_s": {"value": imported, "unit": "s", "target": 1.5, "better": "lower", "reference": None},
        "dbos_launch_ms": {"value": launch * 1000, "unit": "ms", "target": 200, "better": "lower", "reference": None},
        "dbos_run_overhead_ms": {
            "value": overhead * 1000,
            "unit": "ms",
            "target": 150,
            "better": "lower",
            "reference": None,
        },
    }
