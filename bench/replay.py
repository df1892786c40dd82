"""Record and replay: a 20-tool-call Claude Code run recorded once, replayed with ``fast`` timing.

- ``replay_run_s``: the wall time of ``Baton.run(RunSpec(replay=cassette))`` for a run of 20
  Bash calls (``echo N``), from the start to the run's end; ``reference`` is the original's wall
  time, recorded through the model proxy in front of the scripted model server answering each
  step after 0.5 s (a model's latency, low for a real one). What the replay costs beyond the
  agent's own work is baton's and the agent's start: the model answers at once. Target ≤ 15 s
  on the shared 2-core machine.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
import time
from pathlib import Path

from baton.config import Settings
from baton.runs import Baton, RunSpec
from baton.testing import Scenario, ScriptedModelServer

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = ("replay_run_s",)
CALLS = 20
SCENARIO = Scenario.from_yaml(
    "steps:\n"
    + "".join(
        f"  - text: Step {n}.\n"
        f"    tools: [{{name: Bash, input: {{command: echo {n}, description: echo}}}}]\n"
        "    delay: 0.5\n"
        for n in range(CALLS)
    )
    + "final_text: Done.\n",
    name="twenty-calls",
)


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README.md").write_text("# bench\n")
    git = ["git", "-C", str(path), "-c", "user.name=bench", "-c", "user.email=bench@baton.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "initial"], check=True)
    return path


async def _timed(settings: Settings, spec: RunSpec) -> float:
    async with Baton(settings) as baton:
        started = time.perf_counter()
        outcome = await baton.run(spec)
        took = time.perf_counter() - started
    if outcome.status != "finished" or outcome.num_turns != CALLS + 1:
        raise RuntimeError(f"the bench run did not finish its {CALLS} calls: {outcome}")
    return took


async def _measure() -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="baton-bench-replay-") as scratch:
        root = Path(scratch)
        cassette = root / "twenty.cassette.jsonl"
        rules = {"allow": ("Bash(echo:*)",), "prompt": "Echo twenty numbers"}
        with ScriptedModelServer(SCENARIO) as server:
            recording = Settings.load(
                {
                    "BATON_HOME": str(root / "home-1"),
                    "PATH": os.environ["PATH"],
                    "ANTHROPIC_BASE_URL": server.base_url,
                    "ANTHROPIC_API_KEY": "bench-upstream-key-0123456789",
                }
            )
            original = await _timed(recording, RunSpec(repo=_repo(root / "first"), record=cassette, **rules))
        replaying = Settings.load({"BATON_HOME": str(root / "home-2"), "PATH": os.environ["PATH"]})
        replayed = await _timed(replaying, RunSpec(repo=_repo(root / "second"), replay=cassette, **rules))
    return replayed, original


def run() -> dict[str, Metric]:
    replayed, original = asyncio.run(_measure())
    return {"replay_run_s": {"value": replayed, "unit": "s", "target": 15.0, "better": "lower", "reference": original}}
