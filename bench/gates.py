"""Gates inside a run: how long a decision takes to reach the agent, and what a parked run costs.

- ``gate_decision_{sqlite,postgres}_p50_ms/_p99_ms``: a decision recorded by **another process**
  (``GateLedger.decide``, what ``baton approve`` and the HTTP server call) until the run's side
  answers the agent: the executing process's :class:`~baton.runs.gating.RunGates` waits in-process
  on the gate while its :class:`~baton.runs.inbox.InboxReader` reads the inbox (SQLite polled every
  20 ms; Postgres LISTEN/NOTIFY) and its ``RunCommands`` wakes the waiter. The writer's clock stops
  when ``decide`` returns (its commit), ours when ``RunGates.decide`` returns the answer.
  ``GATES`` gates, one after the other. Targets: p99 ≤ 100 ms SQLite, ≤ 50 ms Postgres.
- ``gate_decision_in_process_p99_ms``: the decision made in the executing process (the HTTP
  server executing the run: ``decide`` then ``wake_local``). Target ≤ 10 ms.
- ``gate_parked_resume_baton_ms``: a real Claude Code run (scripted model) parked on its gate
  (grace 0.3 s); from the decision's commit until baton asks the adapter to start Claude again
  (``session/new`` logged: everything baton does — wake, checks, take-over, conversation, plan,
  launch files), median of ``PARKS``. Target ≤ 300 ms. ``gate_parked_agent_start_ms``: from there
  until Claude Code is up (``session/new`` answered), reported separately (no target of baton's).
- ``gate_parked_memory_kb``: what the baton process holds more per parked run, with
  ``PARKED`` runs parked at once (tracemalloc, after a warm-up park and a GC; the in-process
  scripted model's record of requests left out). It includes process-wide caches that grow
  with use (SQLAlchemy's connection records and compiled statements). Target ≤ 100 KB.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from baton.config import Settings
from baton.gates import Decision, Gatekeeper, Policy, ToolCall
from baton.gates.ledger import GateLedger
from baton.runs.executors import this_executor_id
from baton.runs.gating import RunGates
from baton.runs.inbox import InboxReader, RunCommands
from baton.runs.parking import wake_local
from baton.store import Redactor, SessionLog, Store
from baton.testing.postgres import TemporaryPostgres

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = (
    "gate_decision_sqlite_p50_ms",
    "gate_decision_sqlite_p99_ms",
    "gate_decision_postgres_p50_ms",
    "gate_decision_postgres_p99_ms",
    "gate_decision_in_process_p50_ms",
    "gate_decision_in_process_p99_ms",
    "gate_parked_resume_baton_ms",
    "gate_parked_agent_start_ms",
    "gate_parked_memory_kb",
)
GATES = 200
PARKS = 5
PARKED = 3

_DECIDER = """
import asyncio, json, sys, time
from baton.gates.ledger import GateLedger
from baton.store import Store

async def main(url, run_id, count):
    store = await asyncio.to_thread(Store.open, url)
    ledger = GateLedger(store)
    committed = {}
    async with store:
        print("ready", flush=True)
        while len(committed) < count:
            pending = await ledger.list(run_id=run_id, status="pending")
            if not pending:
                await asyncio.sleep(0.005)
                continue
            gate = pending[0]
            binding = {"bound_call_id": gate.bound_call_id, "bound_input_hash": gate.bound_input_hash}
            await ledger.decide(gate.id, {"decision": "approve", **binding}, decided_by="bench")
            committed[gate.id] = time.time()
    print(json.dumps(committed), flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def _call(index: int) -> ToolCall:
    return ToolCall(tool_name="Bash", input={"command": f"touch file{index}.txt"}, tool_call_id=f"toolu_{index}")


async def _decisions(url: str, *, in_process: bool) -> list[float]:
    """Latencies (ms) from a decision's commit to the run's answer, for ``GATES`` gates."""
    store = await asyncio.to_thread(Store.open, url)
    answered: dict[str, float] = {}
    committed: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="baton-bench-gates-ws-") as workspace:
        async with store, SessionLog(store, Redactor()) as log:
            record = await store.create_run(agent="claude")
            await store.update_run(record.id, status="running", executor_id=this_executor_id())
            log.open_run(record.id)

            def note(name: str, params: Any) -> None:
                log.append(record.id, "baton", f"_baton/{name}", {"method": f"_baton/{name}", "params": params})

            gatekeeper = Gatekeeper(Policy.build("default"), Path(workspace))
            gates = RunGates(store, record.id, note, gatekeeper, grace_seconds=60, expiry_seconds=3600)
            commands = RunCommands(run_mode="background", note=note, cancel=lambda: None, set_mode=_no_mode)
            ask = Decision("ask", "mode:default", "asks")
            interval = Settings().inbox_poll_seconds
            decider = None
            if not in_process:
                decider = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", _DECIDER, url, record.id, str(GATES), stdout=asyncio.subprocess.PIPE
                )
                assert decider.stdout is not None
                await decider.stdout.readline()
            async with InboxReader(store, record.id, taken_by="bench", interval=interval, on_command=commands.handle):
                for index in range(GATES):
                    call = _call(index)
                    asking = asyncio.create_task(
                        gates.decide(
                            [call],
                            ask,
                            None,
                            bound_call_id=call.tool_call_id,
                            bound_input_hash=f"{index:064x}",
                            cancelled=asyncio.Event(),
                        )
                    )
                    if in_process:
                        gate = await _pending(store, record.id)
                        body = {
                            "decision": "approve",
                            "bound_call_id": gate.bound_call_id,
                            "bound_input_hash": gate.bound_input_hash,
                        }
                        decided = await GateLedger(store).decide(gate.id, body, decided_by="bench")
                        committed[gate.id] = time.time()
                        wake_local(gate.id, decided)
                    answer = await asyncio.wait_for(asking, 30)
                    assert answer.behavior == "allow", answer
                    assert answer.gate_id is not None
                    answered[answer.gate_id] = time.time()
            if decider is not None:
                assert decider.stdout is not None
                committed = json.loads(await decider.stdout.readline())
                await decider.wait()
            log.close_run(record.id)
    return [(answered[gate_id] - at) * 1000 for gate_id, at in committed.items()]


async def _no_mode(mode: str) -> None:
    return None


async def _pending(store: Store, run_id: str) -> Any:
    ledger = GateLedger(store)
    while True:
        pending = await ledger.list(run_id=run_id, status="pending")
        if pending:
            return pending[0]
        await asyncio.sleep(0.001)


async def _parks(home: Path) -> tuple[list[float], list[float], float]:
    """Real Claude Code runs that park and resume: baton's part, the agent's start-up, memory."""
    from baton.runs import Baton, RunSpec
    from baton.testing import ScriptedModelServer

    baton_ms: list[float] = []
    agent_ms: list[float] = []
    with ScriptedModelServer("gate-park") as server:
        settings = replace(
            Settings.load({"BATON_HOME": str(home), "PATH": os.environ.get("PATH", "")}),
            anthropic_base_url=server.base_url,
            anthropic_api_key="sk-bench-gates-0123456789abcdef",
            gate_grace_seconds=0.3,
        )
        async with Baton(settings) as baton:
            for index in range(PARKS + 1):
                handle = await baton.start(RunSpec(prompt="go", repo=_git_repo(home / f"repo{index}")))
                parked = await handle.wait(through_parks=False)
                assert parked.status == "paused", parked
                ledger = GateLedger(baton.store)
                gate = await ledger.get(parked.gate_id or "")
                binding = {"bound_call_id": gate.bound_call_id, "bound_input_hash": gate.bound_input_hash}
                await ledger.decide(gate.id, {"decision": "approve", **binding}, decided_by="bench")
                decided = time.time()
                wake_local(gate.id)
                outcome = await handle.wait()
                assert outcome.status == "finished", outcome
                entries = await baton.log.read(handle.run_id)
                new = [e for e in entries if e["method"] == "session/new"]  # to and from, per execution
                asked, started = _stamp(new[-2]["ts"]), _stamp(new[-1]["ts"])
                if index > 0:  # the first run warms the imports and caches up
                    baton_ms.append((asked - decided) * 1000)
                    agent_ms.append((started - asked) * 1000)
            # Memory: PARKED more runs parked at once, against the process before them.
            tracemalloc.start()
            try:
                await _park(baton, home / "warm")
                server._requests.clear()  # the scripted model's record of requests is not baton's
                gc.collect()
                before = tracemalloc.take_snapshot()
                for index in range(PARKED):
                    await _park(baton, home / f"parked{index}")
                await asyncio.sleep(0.5)  # the conversation keepers save their last state
                server._requests.clear()
                gc.collect()
                after = tracemalloc.take_snapshot()
            finally:
                tracemalloc.stop()
            memory = sum(stat.size_diff for stat in after.compare_to(before, "filename")) / 1024 / PARKED
    return baton_ms, agent_ms, memory


async def _park(baton: Any, path: Path) -> None:
    from baton.runs import RunSpec

    handle = await baton.start(RunSpec(prompt="go", repo=_git_repo(path)))
    parked = await handle.wait(through_parks=False)
    assert parked.status == "paused", parked


def _git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README.md").write_text("# r\n")
    git = ["git", "-C", str(path), "-c", "user.name=bench", "-c", "user.email=bench@baton.invalid"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run([*git, *args], check=True)
    return path


def _stamp(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _metric(value: float, unit: str, target: float) -> Metric:
    return {"value": round(value, 2), "unit": unit, "target": target, "better": "lower", "reference": None}


def _latencies(name: str, values: list[float], target: float) -> dict[str, Metric]:
    return {
        f"gate_decision_{name}_p50_ms": _metric(statistics.median(values), "ms", target),
        f"gate_decision_{name}_p99_ms": _metric(_percentile(values, 0.99), "ms", target),
    }


def run() -> dict[str, Metric]:
    results: dict[str, Metric] = {}
    with tempfile.TemporaryDirectory(prefix="baton-bench-gates-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'baton.db'}"
        results |= _latencies("sqlite", asyncio.run(_decisions(url, in_process=False)), 100.0)
        url = f"sqlite:///{Path(tmp) / 'in-process.db'}"
        results |= _latencies("in_process", asyncio.run(_decisions(url, in_process=True)), 10.0)
    with TemporaryPostgres() as url:
        results |= _latencies("postgres", asyncio.run(_decisions(url, in_process=False)), 50.0)
    with tempfile.TemporaryDirectory(prefix="baton-bench-parks-") as tmp:
        baton_ms, agent_ms, memory = asyncio.run(_parks(Path(tmp)))
    results["gate_parked_resume_baton_ms"] = _metric(statistics.median(baton_ms), "ms", 300.0)
    results["gate_parked_agent_start_ms"] = _metric(statistics.median(agent_ms), "ms", 5000.0)
    results["gate_parked_memory_kb"] = _metric(memory, "KB", 100.0)
    return results
