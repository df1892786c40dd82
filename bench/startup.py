"""Start-up of the ``baton`` command and of the light core API, as a user meets them.

Each figure is a fresh process (the installed console script, or ``python -c``), so nothing is
cached in memory between runs; the files are in the page cache after the first (untimed) run.
Every figure is the process's CPU time (user + system): on this shared machine the wall time
is that times the neighbours' load, and on a quiet one it is within a few ms of it.

- ``cli_startup_ms``: ``baton --help`` (target ≤ 300 ms);
- ``cli_usage_error_ms``: ``baton run … --repo MISSING``, refused before any agent code is
  imported (target ≤ 300 ms);
- ``cli_read_ms``: the slowest median of ``baton runs``, ``baton show RUN`` and ``baton gates``
  on a home with 20 runs, their logs and gates (target ≤ 500 ms);
- ``light_api_import_ms``: a process importing
  :mod:`baton.runs.queries` and ``baton``'s public names (target ≤ 600 ms).

Medians of 7 runs after one warm-up.
"""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from baton.config import Settings

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = ("cli_startup_ms", "cli_usage_error_ms", "cli_read_ms", "light_api_import_ms")
RUNS = 7
LIGHT_IMPORT = "import baton.runs.queries; from baton import BatonError, RunSpec, Runs, Settings"


def _baton() -> list[str]:
    script = Path(sys.executable).parent / "baton"
    return [str(script)] if script.is_file() else [sys.executable, "-c", "from baton.cli import main; main()"]


def _timed(argv: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=120)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _median_ms(argv: Sequence[str], env: dict[str, str]) -> float:
    _timed(argv, env)
    samples = [_timed(argv, env)[1] for _ in range(RUNS)]
    return statistics.median(samples) * 1000


async def _fill(settings: Settings, repo: Path) -> str:
    """20 runs with a short log each and a gate on every other one; the last run's id."""
    from baton.gates.ledger import GateLedger
    from baton.store import Redactor, SessionLog, Store

    settings.home.mkdir(parents=True, exist_ok=True)
    async with Store.open(settings.resolved_database_url) as store, SessionLog(store, Redactor()) as log:
        ledger = GateLedger(store)
        run_id = ""
        for number in range(20):
            record = await store.create_run(agent="claude", repo=str(repo), request={"prompt": f"task {number}"})
            run_id = record.id
            log.open_run(run_id)
            for _ in range(50):
                message = {"jsonrpc": "2.0", "method": "session/update", "params": {"text": "x" * 200}}
                log.append(run_id, "from_agent", "session/update", message)
            if number % 2:
                await ledger.open(run_id, "tool", summary="rm -rf one", tool_name="Bash", input={"command": "rm"})
        await log.flush()
    return run_id


def run() -> dict[str, Metric]:
    with tempfile.TemporaryDirectory(prefix="baton-bench-startup-") as folder:
        tmp = Path(folder)
        env = {**os.environ, "BATON_HOME": str(tmp / "home")}
        env.pop("BATON_DATABASE_URL", None)
        (tmp / "repo").mkdir()
        run_id = asyncio.run(_fill(Settings.load({"BATON_HOME": env["BATON_HOME"]}), tmp / "repo"))
        baton = _baton()
        startup = _median_ms([*baton, "--help"], env)
        usage = _median_ms([*baton, "run", "hi", "--repo", str(tmp / "missing")], env)
        read = max(
            _median_ms([*baton, "runs"], env),
            _median_ms([*baton, "show", run_id], env),
            _median_ms([*baton, "gates"], env),
        )
        light = _median_ms([sys.executable, "-c", LIGHT_IMPORT], env)
    return {
        "cli_startup_ms": _metric(startup, 300),
        "cli_usage_error_ms": _metric(usage, 300),
        "cli_read_ms": _metric(read, 500),
        "light_api_import_ms": _metric(light, 600),
    }


def _metric(value: float, target: float) -> Metric:
    return {"value": round(value, 1), "unit": "ms", "target": target, "better": "lower", "reference": None}
