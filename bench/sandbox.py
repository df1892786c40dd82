"""What the sandbox costs a run's start: spawn the agent and have ``initialize`` answered.

The agent is ``tests/agents/acp_script_agent.py echo`` (plain Python), spawned by
:class:`~baton.agents.subprocess.SubprocessAgent` as every subprocess agent is, three ways,
interleaved so the machine's noise falls on all of them alike:

- ``bwrap``: the run's sandbox (:func:`baton.sandbox.plan.plan_sandbox`, the default): the filesystem,
  and a network namespace whose two proxies baton serves in it before the agent runs;
- ``none``: contained only (a PID namespace, ``/`` bound as it is);
- uncontained: ``setpriv --pdeathsig KILL``, what baton does where bubblewrap cannot contain.

``sandbox_start_overhead_ms`` is the median of ``bwrap`` minus the median of ``none``;
``sandbox_containment_overhead_ms`` the median of ``none`` minus the uncontained one.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from acp import PROTOCOL_VERSION, connect_to_agent

from baton.acp.host import BatonHost
from baton.agents.subprocess import AgentCommand, SubprocessAgent
from baton.gates import Gatekeeper, Policy
from baton.sandbox import ModelUpstream, new_placeholder_key
from baton.sandbox.bwrap import Containment, containment
from baton.sandbox.network import SandboxNetwork
from baton.sandbox.plan import SandboxPlan, command_paths, plan_sandbox

from . import Metric

__all__ = ["METRICS", "run"]

METRICS = ("sandbox_start_overhead_ms", "sandbox_containment_overhead_ms")
SCRIPT = Path(__file__).resolve().parent.parent / "tests" / "agents" / "acp_script_agent.py"
RUNS = 15


async def _start_ms(work: Path, plan: SandboxPlan) -> float:
    """Milliseconds from the spawn to the agent's answer to ``initialize``."""
    argv = (sys.executable, str(SCRIPT), "echo", "0")
    network = None
    if plan.network.isolated:  # as a run's: its two proxies served in the agent's namespace
        network = SandboxNetwork(plan.network, ModelUpstream("http://127.0.0.1:9"), new_placeholder_key())
    command = AgentCommand(argv, {"PATH": "/usr/bin:/bin"}, work, "run_bench_sandbox", sandbox=plan, network=network)
    agent = SubprocessAgent("echo", command)
    host = BatonHost(Gatekeeper(Policy.build("default"), work), _nothing)
    started = time.perf_counter()
    conn = connect_to_agent(host, await agent.start())  # type: ignore[arg-type]
    try:
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        return (time.perf_counter() - started) * 1000
    finally:
        await conn.close()
        await agent.aclose()


async def _nothing() -> None:
    return None


def run() -> dict[str, Metric]:
    found = containment()
    if not found.available:
        raise SystemExit(f"sandbox benchmark: {found.reason}")
    with tempfile.TemporaryDirectory(prefix="baton-bench-sandbox-") as tmp:
        work, home = Path(tmp) / "repo", Path(tmp) / "home"
        work.mkdir()
        sandboxed = plan_sandbox(None, workspace=work, agent_home=home / "agent-home", baton_home=home)
        plans = {
            "bwrap": sandboxed.with_read_only(command_paths([sys.executable, str(SCRIPT)])),
            "none": SandboxPlan("none", found),
            "uncontained": SandboxPlan("none", Containment(False, reason="the benchmark's reference")),
        }
        times: dict[str, list[float]] = {name: [] for name in plans}
        for index in range(RUNS + 1):
            for name, plan in plans.items():
                elapsed = asyncio.run(_start_ms(work, plan))
                if index:  # the first round warms the page cache
                    times[name].append(elapsed)
    median = {name: statistics.median(values) for name, values in times.items()}
    print("  agent start, median ms: " + ", ".join(f"{name} {value:.1f}" for name, value in median.items()))
    return {
        "sandbox_start_overhead_ms": {
            "value": round(median["bwrap"] - median["none"], 1),
            "unit": "ms",
            "target": 30,
            "better": "lower",
            "reference": round(median["none"], 1),
        },
        "sandbox_containment_overhead_ms": {
            "value": round(median["none"] - median["uncontained"], 1),
            "unit": "ms",
            "target": 30,
            "better": "lower",
            "reference": round(median["uncontained"], 1),
        },
    }
