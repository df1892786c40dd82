"""The ``baton_*`` metrics of runs executed through ``Baton(metrics=True)``, read from its
Prometheus exposition with prometheus_client's parser. The agent is a real subprocess
(``acp_script_agent.py``, as ``--agent-cmd``): ``ask`` asks permission for one command (a gate,
decided here), ``exit`` dies in the middle of its turn."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.agents.conftest import SCRIPT

from baton.agents.command import COMMAND_AGENT
from baton.config import Settings
from baton.gates.ledger import GateLedger
from baton.observability.metrics import METRIC_NAMES
from baton.runs import Baton, RunSpec

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def clean_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("OTEL_")]:
        monkeypatch.delenv(name)


def samples(baton: Baton) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    assert baton.telemetry is not None
    found = {}
    for family in text_string_to_metric_families(baton.telemetry.metrics_text().decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def spec(repo: Path, behaviour: str) -> RunSpec:
    return RunSpec(
        prompt="go",
        repo=repo,
        agent=COMMAND_AGENT,
        agent_command=(sys.executable, str(SCRIPT), behaviour),
        trust_agent_permissions=True,
    )


async def test_running_gates_tool_calls_and_failures_are_counted(settings: Settings, repo: Path) -> None:
    agent = (("agent", COMMAND_AGENT),)
    async with Baton(settings, metrics=True) as baton:
        handle = await baton.start(spec(repo, "ask"))
        ledger = GateLedger(baton.store)
        async with asyncio.timeout(30):
            while True:
                pending = [g for g in await ledger.list(run_id=handle.run_id) if g.status == "pending"]
                if pending:
                    break
                await asyncio.sleep(0.02)
        await baton.log.flush()
        waiting = samples(baton)
        [gate] = pending
        binding = {"bound_call_id": gate.bound_call_id, "bound_input_hash": gate.bound_input_hash}
        await ledger.decide(gate.id, {**binding, "decision": "approve"}, decided_by="tester")
        assert (await handle.wait()).status == "finished"
        failing = await baton.start(spec(repo, "exit"))
        failed = await failing.wait()
        assert failed.status == "failed"
        await baton.log.flush()
        ended = samples(baton)
        names = {name for name, _labels in ended}

    # While the gate waits: the run is running, its gate pending.
    assert waiting[("baton_runs_running", agent)] == 1
    assert waiting[("baton_gates_pending", (("kind", gate.kind),))] == 1
    assert waiting[("baton_runs_started_total", agent)] == 1
    # Once both ended: nothing runs or waits; the gate's wait, the call's decision, the failure.
    assert ended[("baton_runs_running", agent)] == 0
    assert ended[("baton_gates_pending", (("kind", gate.kind),))] == 0
    assert ended[("baton_gate_wait_seconds_count", (("decision", "approve"), ("kind", gate.kind)))] == 1
    assert ended[("baton_tool_calls_total", (("decision", "allow"), ("kind", "execute")))] == 1
    assert ended[("baton_runs_started_total", agent)] == 2
    assert ended[("baton_runs_finished_total", agent)] == 1
    assert ended[("baton_runs_failed_total", (*agent, ("code", failed.code or "")))] == 1
    assert ended[("baton_run_duration_seconds_count", (*agent, ("status", "failed")))] == 1
    assert ended[("baton_log_entries_total", ())] > 10
    # Every metric of the list is exposed (Prometheus: counters end in _total, histograms in _seconds).
    exposed = {name.removesuffix("_total").removesuffix("_count").removesuffix("_seconds") for name in names}
    # (the script agent reports no tokens or cost: test_metrics_endpoint.py counts Claude's; no run is
    # cancelled; the queue's metrics are a fleet worker's: tests/fleet/test_takeover.py)
    unseen = {"baton_tokens", "baton_cost_usd", "baton_runs_cancelled", "baton_queue_depth", "baton_dispatch_latency"}
    missing = set(METRIC_NAMES) - exposed - unseen
    assert missing == set(), missing
