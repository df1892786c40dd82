"""Budgets with the real Claude Code (scripted): reaching one opens a resource_limit gate and parks
the run; ``continue`` with a higher budget resumes it to the end (baton.runs.budgeting)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.runs.test_gates_claude import next_gate, params_of, scripted

from baton.agents.processes import run_process_ids
from baton.config import Settings
from baton.errors import GateError, RefusedError
from baton.gates.ledger import GateLedger
from baton.runs import Baton, RunSpec

pytestmark = pytest.mark.claude

# The scripted model's default usage costs Claude's price table $0.0008 a request: a budget of
# $0.001 lets the first request (Write hello.txt) through and stops Claude after the second.
BUDGET = 0.001


async def test_a_usd_budget_reached_parks_the_run_and_continue_finishes_it(settings: Settings, repo: Path) -> None:
    with scripted(settings, "write-and-run") as (configured, server):
        async with Baton(configured) as baton:
            spec = RunSpec(prompt="go", repo=repo, permission_mode="acceptEdits", allow=("Bash(echo:*)",))
            handle = await baton.start(RunSpec(**{**spec.__dict__, "budget_usd": BUDGET}))
            parked = await handle.wait(through_parks=False)
            assert parked.status == "paused", parked
            assert run_process_ids(handle.run_id) == []
            ledger = GateLedger(baton.store)
            [gate] = await ledger.list(run_id=handle.run_id)
            assert gate.kind == "resource_limit" and gate.status == "pending" and parked.gate_id == gate.id
            assert gate.input is not None and gate.input["limits"] == ["usd"]
            assert gate.input["budget"] == {"usd": BUDGET} and gate.input["spent"]["usd"] == pytest.approx(0.0016)
            assert gate.summary.startswith("Budget reached: cost $0.0016 of $0.001.")
            with pytest.raises(GateError) as wrong:  # a plan decision never resolves a budget
                await ledger.decide(gate.id, {"decision": "approve"}, decided_by="test", kind="plan_review")
            assert wrong.value.code in ("gate_kind_mismatch", "gate_not_resumable")
            await ledger.decide(gate.id, {"decision": "continue", "budget": {"usd": 1}}, decided_by="test")
            assert await handle.continue_parked(parked) is None
            outcome = await handle.wait()
            record = await baton.store.get_run(handle.run_id)
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished", outcome
    assert "hi" in (outcome.result or "")
    assert record.budget_usd == 1.0
    [opened] = params_of(entries, "_baton/gate_opened")
    assert opened["kind"] == "resource_limit" and opened["reason"] == "budget:usd"
    [resolved] = params_of(entries, "_baton/gate_resolved")
    assert resolved["gate_id"] == gate.id and resolved["decision"] == "continue" and resolved["budget"] == {"usd": 1.0}
    usages = params_of(entries, "_baton/usage")
    assert usages[0]["subtype"] == "error_max_budget_usd" and usages[-1]["subtype"] == "success"
    statuses = [p["status"] for p in params_of(entries, "_baton/status")]
    assert statuses == ["running", "paused", "running", "finished"]
    # Claude stopped before the second call ran; resumed, it ran it
    assert [r.step for r in server.requests if r.scenario][:2] == [0, 1]


async def test_a_turns_budget_stops_claude_at_its_model_turns(settings: Settings, repo: Path) -> None:
    with scripted(settings, "write-and-run") as (configured, server):
        async with Baton(configured) as baton:
            spec = RunSpec(
                prompt="go", repo=repo, permission_mode="acceptEdits", allow=("Bash(echo:*)",), budget_turns=2
            )
            handle = await baton.start(spec)
            parked = await handle.wait(through_parks=False)
            at_park = [r.step for r in server.requests if r.scenario]
            [gate] = await GateLedger(baton.store).list(run_id=handle.run_id)
            record = await baton.store.get_run(handle.run_id)
            await GateLedger(baton.store).decide(
                gate.id, {"decision": "continue", "budget": {"turns": 10}}, decided_by="test"
            )
            assert await handle.continue_parked(parked) is None
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
    # The scenario takes three model turns; Claude stops before the third model request.
    assert at_park == [0, 1]
    assert parked.status == "paused" and gate.input is not None
    assert gate.input["limits"] == ["turns"] and gate.input["spent"]["turns"] == 2
    assert gate.summary.startswith("Budget reached: turns 2 of 2.")
    assert params_of(entries, "_baton/usage")[0]["subtype"] == "error_max_turns"
    assert record.total_cost_usd == pytest.approx(0.0016)  # a parked run's row has its cost so far
    assert outcome.status == "finished", outcome


async def test_a_usd_budget_for_an_agent_without_cost_is_refused(settings: Settings, repo: Path) -> None:
    async with Baton(settings) as baton:
        with pytest.raises(RefusedError) as refused:
            await baton.start(RunSpec(prompt="go", repo=repo, agent="codex", budget_usd=1.0))
    assert refused.value.code == "budget_not_supported"


async def test_a_denied_budget_gate_ends_the_run_as_budget_exhausted(settings: Settings, repo: Path) -> None:
    with scripted(settings, "write-and-run") as (configured, server):
        async with Baton(configured) as baton:
            spec = RunSpec(
                prompt="go", repo=repo, permission_mode="acceptEdits", allow=("Bash(echo:*)",), budget_usd=BUDGET
            )
            handle = await baton.start(spec)
            parked = await handle.wait(through_parks=False)
            ledger = GateLedger(baton.store)
            [gate] = await ledger.list(run_id=handle.run_id)
            await ledger.decide(gate.id, {"decision": "deny", "reason": "too expensive"}, decided_by="test")
            requests = len(server.requests)
            assert await handle.continue_parked(parked) is None
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
            record = await baton.store.get_run(handle.run_id)
            events = [event async for event in baton.events(handle.run_id)]
    assert outcome.status == "failed" and outcome.code == "budget_exhausted", outcome
    assert outcome.exit_code == 1 and gate.id in (outcome.message or "")
    # What the run spent stays its cost: on the outcome, the row and the final event.
    assert outcome.total_cost_usd == pytest.approx(0.0016) and record.total_cost_usd == pytest.approx(0.0016)
    failed = events[-1]
    assert failed["type"] == "task.failed" and failed["data"]["total_cost_usd"] == pytest.approx(0.0016)
    assert failed["data"]["usage"]["output_tokens"] > 0 and failed["data"]["usage"]["input_tokens"] > 0
    [resolved] = params_of(entries, "_baton/gate_resolved")
    assert resolved["gate_id"] == gate.id and resolved["decision"] == "deny" and resolved["reason"] == "too expensive"
    assert len(server.requests) == requests  # no further turn


async def test_a_seconds_budget_counts_the_turns_time(settings: Settings, repo: Path) -> None:
    with scripted(settings, "write-and-run") as (configured, _):
        async with Baton(configured) as baton:
            spec = RunSpec(
                prompt="go", repo=repo, permission_mode="acceptEdits", allow=("Bash(echo:*)",), budget_seconds=0.01
            )
            handle = await baton.start(spec)
            parked = await handle.wait(through_parks=False)
            ledger = GateLedger(baton.store)
            [gate] = await ledger.list(run_id=handle.run_id)
            await ledger.decide(gate.id, {"decision": "continue", "budget": {"seconds": 3600}}, decided_by="test")
            assert await handle.continue_parked(parked) is None
            outcome = await handle.wait()
            record = await baton.store.get_run(handle.run_id)
    assert parked.status == "paused" and gate.input is not None
    assert gate.input["limits"] == ["seconds"] and gate.input["spent"]["seconds"] > 0.01
    assert outcome.status == "finished", outcome
    assert (record.budget_seconds, record.budget_usd, record.budget_turns) == (3600, None, None)


async def test_a_seconds_budget_stops_a_long_command_mid_turn_and_parks(settings: Settings, repo: Path) -> None:
    """`sleep 20` in a turn with a budget of 3 s: the turn is interrupted when the budget runs out,
    not when the command ends, and the run parks on its resource_limit gate with no process left."""
    with scripted(settings, "long-command") as (configured, _):
        async with Baton(configured) as baton:
            spec = RunSpec(prompt="go", repo=repo, allow=("Bash(sleep:*)", "Bash(echo:*)"), budget_seconds=3)
            handle = await baton.start(spec)
            parked = await asyncio.wait_for(handle.wait(through_parks=False), 60)
            assert parked.status == "paused", parked
            assert run_process_ids(handle.run_id) == []
            ledger = GateLedger(baton.store)
            [gate] = await ledger.list(run_id=handle.run_id)
            entries = await baton.log.read(handle.run_id)
            await ledger.decide(gate.id, {"decision": "deny", "reason": "enough"}, decided_by="test")
            assert await handle.continue_parked(parked) is None
            outcome = await handle.wait()
    assert gate.kind == "resource_limit" and parked.gate_id == gate.id and gate.input is not None
    assert gate.input["limits"] == ["seconds"] and 3 <= gate.input["spent"]["seconds"] < 20
    [turn] = params_of(entries, "_baton/turn_complete")
    assert turn["stop_reason"] == "cancelled" and turn["gate_wait_ms"] == 0
    [opened] = params_of(entries, "_baton/gate_opened")
    assert opened["reason"] == "budget:seconds"
    results = json.dumps([e["payload"] for e in entries if e["method"] == "session/update"])
    assert "sleep 20" in results and '"done' not in results  # the command never finished
    assert outcome.status == "failed" and outcome.code == "budget_exhausted", outcome


@pytest.mark.slow  # a 5 s wait for the human on top of Claude's turn
async def test_the_seconds_budget_stands_still_while_a_gate_waits_for_a_human(settings: Settings, repo: Path) -> None:
    """A tool gate waits 5 s for its approval in a turn with a budget of 4 s: the wait is not the
    agent's time, so the turn is not stopped and the run finishes."""
    with scripted(settings, "needs-approval") as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo, budget_seconds=4))
            gate = await next_gate(baton.store, handle.run_id, within=60)
            await asyncio.sleep(5)
            await GateLedger(baton.store).decide(
                gate.id,
                {"decision": "approve", "bound_call_id": gate.bound_call_id, "bound_input_hash": gate.bound_input_hash},
                decided_by="test",
            )
            outcome = await asyncio.wait_for(handle.wait(), 60)
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished", outcome
    assert (repo / "approved.txt").exists()
    [turn] = params_of(entries, "_baton/turn_complete")
    assert turn["gate_wait_ms"] >= 5000 and turn["stop_reason"] == "end_turn"
    assert [p["kind"] for p in params_of(entries, "_baton/gate_opened")] == ["tool"]


async def test_a_seconds_budget_stops_a_turn_waiting_on_a_slow_model(settings: Settings, repo: Path) -> None:
    with scripted(settings, "slow-model") as (configured, _):  # the model answers after 20 s
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo, budget_seconds=2))
            parked = await asyncio.wait_for(handle.wait(through_parks=False), 60)
            [gate] = await GateLedger(baton.store).list(run_id=handle.run_id)
            entries = await baton.log.read(handle.run_id)
            assert run_process_ids(handle.run_id) == []
            await baton.cancel(handle.run_id)  # a parked run ends at once, its gate denied
            record = await baton.store.get_run(handle.run_id)
            [denied] = await GateLedger(baton.store).list(run_id=handle.run_id)
    assert parked.status == "paused" and gate.input is not None and gate.input["limits"] == ["seconds"]
    assert "Sorry for the wait." not in json.dumps([e["payload"] for e in entries])
    assert record.status == "cancelled" and denied.status == "denied"
