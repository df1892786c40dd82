"""Waiting for a gate's decision (baton.runs.parking), on SQLite and Postgres, without an agent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from baton.gates.ledger import GateLedger, GateRecord
from baton.runs.parking import decided_calls, pending_gates, wait_for_decision, wait_for_decisions, wake_local
from baton.store import Store


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    opened = Store.open(store_url)
    try:
        yield opened
    finally:
        await opened.aclose()


async def _gate(store: Store, run_id: str, command: str = "touch a", expires: float | None = None) -> GateRecord:
    gate, _ = await GateLedger(store).open(
        run_id,
        "tool",
        summary=f"Bash: {command}",
        tool_name="Bash",
        tool_call_id=f"toolu_{command}",
        bound_call_id=f"toolu_{command}",
        bound_input_hash=f"{abs(hash(command)):064d}"[:64],
        input={"command": command},
        expires_in_seconds=expires,
    )
    return gate


def _approval(gate: GateRecord) -> dict[str, object]:
    return {"decision": "approve", "bound_call_id": gate.bound_call_id, "bound_input_hash": gate.bound_input_hash}


async def test_a_decision_made_here_is_handed_to_the_waiter(store: Store) -> None:
    run = await store.create_run(agent="claude")
    gate = await _gate(store, run.id)
    waiting = asyncio.create_task(wait_for_decision(store, run.id, gate.id, within=30))
    await asyncio.sleep(0.05)
    decided = await GateLedger(store).decide(gate.id, _approval(gate), decided_by="here")
    wake_local(gate.id, decided)
    got = await asyncio.wait_for(waiting, 5)
    assert got is decided and got.status == "approved"


async def test_a_decision_from_elsewhere_is_read_from_the_ledger(store: Store) -> None:
    run = await store.create_run(agent="claude")
    gate = await _gate(store, run.id)
    waiting = asyncio.create_task(wait_for_decision(store, run.id, gate.id, within=30, poll_seconds=0.05))
    await GateLedger(store).decide(gate.id, {**_approval(gate), "decision": "deny"}, decided_by="elsewhere")
    got = await asyncio.wait_for(waiting, 5)  # no wake-up: the waiter's own read finds it
    assert got is not None and got.status == "denied" and got.decided_by == "elsewhere"


async def test_the_grace_period_ends_the_wait_and_a_stop_ends_it_early(store: Store) -> None:
    run = await store.create_run(agent="claude")
    gate = await _gate(store, run.id)
    assert await wait_for_decision(store, run.id, gate.id, within=0.1) is None
    stop = asyncio.Event()
    stop.set()
    assert await wait_for_decision(store, run.id, gate.id, within=30, stop=stop) is None
    assert (await GateLedger(store).get(gate.id)).status == "pending"


async def test_a_gate_expiring_while_waited_for_is_a_timeout_denial(store: Store) -> None:
    run = await store.create_run(agent="claude")
    gate = await _gate(store, run.id, expires=0.2)
    got = await asyncio.wait_for(wait_for_decision(store, run.id, gate.id, within=30), 5)
    assert got is not None and got.status == "expired"
    assert (got.decision or {}).get("reason") == "timeout" and got.decided_by == "timeout"


async def test_a_parked_run_waits_for_its_pending_gate_and_names_what_was_decided(store: Store) -> None:
    run = await store.create_run(agent="claude")
    first = await _gate(store, run.id, "touch a")
    second = await _gate(store, run.id, "touch b")  # another input: the first gate is superseded
    await store.update_run(run.id, status="running", status_reason="started")
    await store.update_run(run.id, status="paused", status_reason=first.id)
    waiting = asyncio.create_task(wait_for_decisions(store, run.id, poll_seconds=0.02))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    await GateLedger(store).decide(second.id, _approval(second), decided_by="b")
    assert await asyncio.wait_for(waiting, 5) is True
    assert await pending_gates(store, run.id) == []
    calls = await decided_calls(store, run.id, first.id)
    assert [(call.gate_id, call.status, call.decision) for call in calls] == [(second.id, "approved", "approve")]
    assert await decided_calls(store, run.id, "executor_dead") == []  # not paused on a gate: nothing decided
