"""The fleet (docs/fleet.md) on this machine: one Postgres (``TemporaryPostgres``), ``baton worker``
processes each with its own ``BATON_HOME``, runs queued through ``Baton.queue`` (what ``POST
/v1/runs`` on ``baton serve --no-execute`` calls) with the trivial ACP agent
(``tests/agents/acp_script_agent.py echo``, ``--agent-cmd``), so the agent's own start counts
for nothing.

- ``fleet_dispatch_ms``: queued → the agent's ``initialize`` logged on a worker (its process
  started), p99 of 20 runs queued one at a time on 2 idle workers; from the queue call's wall
  clock to the log entry's ``ts``. What it holds: the queue's poll (``fleet.poll_seconds``, 0.1 s),
  the dequeue, the clone through the worker's mirror cache, the agent's spawn in its sandbox.
  ``fleet_dispatch_p50_ms`` is the median, ``fleet_dispatch_to_start_p50_ms`` the median up to
  the run's ``_baton/run_started`` (dequeued, cloned, agent checked: the rest is the sandbox
  and the agent's spawn).
- ``fleet_takeover_s``: a worker SIGKILLed mid-run → the run ``running`` again on the other
  worker (its ``_baton/status running resumed`` entry), p99 (the worst) of 3 kills.
- ``fleet_tasks_per_minute_{1,2,3}w``: 12 trivial runs queued at once, finished per minute by
  1, 2 and 3 workers of ``--concurrency 1`` (no target: on 2 cores the curve is the figure).
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from baton.config import Settings
from baton.runs import Baton, RunSpec
from baton.store import Redactor, SessionLog, Store
from baton.testing.postgres import TemporaryPostgres

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = (
    "fleet_dispatch_ms",
    "fleet_dispatch_p50_ms",
    "fleet_dispatch_to_start_p50_ms",
    "fleet_takeover_s",
    "fleet_tasks_per_minute_1w",
    "fleet_tasks_per_minute_2w",
    "fleet_tasks_per_minute_3w",
)
SCRIPT = Path(__file__).resolve().parent.parent / "tests" / "agents" / "acp_script_agent.py"
DISPATCHES = 20
KILLS = 3
TASKS = 12


def _baton() -> list[str]:
    script = Path(sys.executable).parent / "baton"
    return [str(script)] if script.is_file() else [sys.executable, "-c", "from baton.cli import main; main()"]


def _env(home: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BATON_", "ANTHROPIC_"))}
    env.update(BATON_HOME=str(home), BATON_DATABASE_URL=url, OTEL_SDK_DISABLED="true")
    return env


class _Fleet:
    def __init__(self, root: Path, url: str) -> None:
        self.root, self.url = root, url
        self.workers: dict[str, subprocess.Popen[str]] = {}

    def start(self, name: str) -> subprocess.Popen[str]:
        home = self.root / name
        home.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen(
            [*_baton(), "worker", "--concurrency", "1"],
            env=_env(home, self.url),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert process.stderr is not None
        for line in process.stderr:  # until it takes fleet runs
            if "taking fleet runs" in line:
                break
        else:
            raise RuntimeError(f"worker {name} did not start")
        self.workers[name] = process
        return process

    def kill(self, name: str) -> None:
        process = self.workers.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stderr is not None:
            process.stderr.close()

    def close(self) -> None:
        for name in list(self.workers):
            process = self.workers[name]
            os.killpg(process.pid, signal.SIGTERM)
        for name in list(self.workers):
            process = self.workers.pop(name)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            if process.stderr is not None:
                process.stderr.close()


def _spec(repo: Path, *args: str) -> RunSpec:
    argv = (sys.executable, str(SCRIPT), "echo", *args)
    return RunSpec(prompt="go", repo=repo, agent="command", agent_command=argv, trust_agent_permissions=True)


def _ts(entry: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(entry["ts"]).replace("Z", "+00:00")).timestamp()


async def _first(log: SessionLog, run_id: str, wanted: Any, within: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for entry in await log.read(run_id):
            if wanted(entry):
                return dict(entry)
        await asyncio.sleep(0.05)
    raise RuntimeError(f"run {run_id}: nothing wanted in {within} s")


async def _until_ended(store: Store, run_ids: list[str], within: float = 600) -> None:
    deadline = time.monotonic() + within
    while not all([(await store.get_run(run_id)).is_terminal for run_id in run_ids]):
        if time.monotonic() > deadline:
            raise RuntimeError("runs did not end")
        await asyncio.sleep(0.1)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


async def _measure(root: Path, url: str, repo: Path) -> dict[str, float]:
    fleet = _Fleet(root, url)
    figures: dict[str, float] = {}
    settings = Settings.load({"BATON_HOME": str(root / "client"), "BATON_DATABASE_URL": url})
    try:
        async with Baton(settings) as baton, SessionLog(baton.store, Redactor()) as log:
            fleet.start("w1")
            fleet.start("w2")
            await baton.queue(_spec(repo, "1"))  # warm-up: the mirror caches, the queue registered
            dispatch: list[float] = []
            to_start: list[float] = []  # queued → _baton/run_started: dequeued, cloned, agent prepared
            for _ in range(DISPATCHES):
                began = time.time()
                record = await baton.queue(_spec(repo, "1"))
                started = await _first(
                    log, record.id, lambda e: e["method"] == "initialize" and e["direction"] == "to_agent"
                )
                dispatch.append((_ts(started) - began) * 1000)
                await _until_ended(baton.store, [record.id])
                opened = await _first(log, record.id, lambda e: e["method"] == "_baton/run_started")
                to_start.append((_ts(opened) - began) * 1000)
            figures["fleet_dispatch_ms"] = _p99(dispatch)
            figures["fleet_dispatch_p50_ms"] = statistics.median(dispatch)
            figures["fleet_dispatch_to_start_p50_ms"] = statistics.median(to_start)
            takeovers = []
            for _ in range(KILLS):
                record = await baton.queue(_spec(repo, "40", "4"))
                await _first(log, record.id, lambda e: e["method"] == "session/update")
                executor = (await baton.store.get_run(record.id)).executor_id or ""
                pids = {name: str(process.pid) for name, process in fleet.workers.items()}
                victim = next(name for name, pid in pids.items() if executor.split(":")[3:4] == [pid])
                killed = time.time()
                fleet.kill(victim)
                resumed = await _first(
                    log,
                    record.id,
                    lambda e: e["method"] == "_baton/status" and e["payload"]["params"].get("reason") == "resumed",
                )
                takeovers.append(_ts(resumed) - killed)
                fleet.start(victim)
                await _until_ended(baton.store, [record.id])
            figures["fleet_takeover_s"] = _p99(takeovers)
            fleet.close()
            for count in (1, 2, 3):
                for n in range(count):
                    fleet.start(f"t{count}-{n}")
                began = time.monotonic()
                run_ids = [(await baton.queue(_spec(repo, "3"))).id for _ in range(TASKS)]
                await _until_ended(baton.store, run_ids)
                figures[f"fleet_tasks_per_minute_{count}w"] = TASKS / ((time.monotonic() - began) / 60)
                fleet.close()
    finally:
        fleet.close()
    return figures


def run() -> dict[str, Metric]:
    postgres = TemporaryPostgres()
    with tempfile.TemporaryDirectory(prefix="baton-bench-fleet-") as scratch, postgres:
        url = postgres.create_schema("fleet")
        root = Path(scratch)
        repo = root / "repo"
        repo.mkdir()
        (repo / "README.md").write_text("# fleet bench\n")
        git = ["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@baton.invalid"]
        for step in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
            subprocess.run([*git, *step], check=True)
        figures = asyncio.run(_measure(root, url, repo))
    results: dict[str, Metric] = {
        "fleet_dispatch_ms": {
            "value": round(figures["fleet_dispatch_ms"], 1),
            "unit": "ms",
            "target": 300.0,
            "better": "lower",
            "reference": None,
        },
        "fleet_takeover_s": {
            "value": round(figures["fleet_takeover_s"], 2),
            "unit": "s",
            "target": 15.0,
            "better": "lower",
            "reference": None,
        },
    }
    for name in ("fleet_dispatch_p50_ms", "fleet_dispatch_to_start_p50_ms"):
        results[name] = {
            "value": round(figures[name], 1),
            "unit": "ms",
            "target": None,
            "better": "lower",
            "reference": None,
        }
    for count in (1, 2, 3):
        name = f"fleet_tasks_per_minute_{count}w"
        results[name] = {
            "value": round(figures[name], 1),
            "unit": "tasks/min",
            "target": None,
            "better": "higher",
            "reference": None,
        }
    return results
