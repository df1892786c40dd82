"""Cancelling a parked run (baton.runs.cancelling), on SQLite and Postgres, without an agent: the
run is only rows — its record, its log, its gates — as a park leaves it; the CLI and HTTP faces of
the same cancel are tested in tests/cli/test_gates_run_cli.py and tests/server/test_server_api.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from baton.acp.extensions import notification
from baton.config import Settings
from baton.errors import RefusedError
from baton.events.project import project
from baton.gates.ledger import GateLedger, GateRecord
from baton.runs.adoption import Adopter
from baton.runs.api import Baton
from baton.runs.cancelling import cancel_run
from baton.runs.executors import this_executor_id
from baton.runs.inbox import post_command
from baton.store import Redactor, SessionLog, Store


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    opened = Store.open(store_url)
    try:
        yield opened
    finally:
        await opened.aclose()


async def parked_run(store: Store, *commands: str) -> tuple[str, list[GateRecord]]:
    """A run as a park leaves it: its log up to ``_baton/status paused``, gates pending, no executor
    (bound to one input, so that none supersedes another)."""
    record = await store.create_run(agent="claude", owner="local", repo="/work/repo")
    ledger = GateLedger(store)
    opened = [
        (
            await ledger.open(
                record.id, "tool", summary=f"Bash: {command}", tool_name="Bash", tool_call_id=f"toolu_{command}",
                bound_call_id=f"toolu_{command}", bound_input_hash="h-one-input", input={"command": command},
            )
        )[0]
        for command in commands
    ]  # fmt: skip
    async with SessionLog(store, Redactor()) as log:
        log.open_run(record.id)
        for name, params in (
            ("run_started", {"run_id": record.id, "agent": "claude", "cwd": "/work/repo"}),
            ("agent_session", {"agent_session_id": "sess-1", "adapter": "claude"}),
            *(("gate_opened", {"gate_id": gate.id, "kind": "tool", "summary": gate.summary}) for gate in opened),
            ("status", {"status": "paused", "reason": "parked", "gate_id": opened[0].id}),
        ):
            message = notification(name, params)
            log.append(record.id, "baton", message["method"], message)
    await store.update_run(record.id, status="running", status_reason="started")
    await store.update_run(record.id, status="paused", status_reason=opened[0].id, executor_id=None)
    return record.id, opened


async def test_a_parked_run_ends_cancelled_at_once_in_one_transaction(store: Store) -> None:
    run_id, (first, second) = await parked_run(store, "touch a", "touch b")
    before = len(await read_log(store, run_id))
    cancelled = await cancel_run(store, run_id, "enough")
    record = await store.get_run(run_id)
    assert cancelled.to_json() == {"status": "cancelled", "inbox_id": cancelled.inbox_id}
    assert record.status == "cancelled" and record.status_reason == "cancelled" and record.finished_at is not None
    assert [t.to_status for t in await store.list_transitions(run_id)][-2:] == ["paused", "cancelled"]
    for gate in (first, second):
        denied = await GateLedger(store).get(gate.id)
        assert denied.status == "denied" and denied.decided_by == "cancel"
        assert denied.decision == {"decision": "deny", "reason": "cancelled", "interrupt": True}
    assert [m["kind"] for m in await store.inbox_pending(run_id)] == ["gate_decision", "gate_decision"]
    entries = await read_log(store, run_id)
    assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1))  # numbered after the park
    added = entries[before:]
    assert [entry["method"] for entry in added] == [
        "_baton/inbox", "_baton/gate_resolved", "_baton/gate_resolved", "_baton/status",
    ]  # fmt: skip
    command = {"id": cancelled.inbox_id, "kind": "cancel", "payload": {"reason": "enough"}}
    assert added[0]["payload"]["params"] == command
    events = project(entries)
    assert [event["type"] for event in events][-3:] == ["gate.resolved", "gate.resolved", "task.finished"]
    resolved = {"gate_id": second.id, "decision": "deny", "reason": "cancelled", "decided_by": "cancel"}
    assert events[-2]["data"] == resolved
    assert events[-1]["data"]["stop_reason"] == "cancelled"
    # Ended: a second cancel is refused, and nothing more is written.
    with pytest.raises(RefusedError) as again:
        await cancel_run(store, run_id)
    assert again.value.code == "run_not_running"
    assert len(await read_log(store, run_id)) == len(entries)


async def test_a_run_a_live_process_executes_gets_the_cancel_through_its_inbox(store: Store) -> None:
    run_id, (gate,) = await parked_run(store, "touch a")
    await store.update_run(run_id, executor_id=this_executor_id())  # waiting in its grace period, in a live process
    cancelled = await cancel_run(store, run_id)
    assert cancelled.status == "queued"
    assert (await store.get_run(run_id)).status == "paused" and (await GateLedger(store).get(gate.id)).is_pending
    assert [m["kind"] for m in await store.inbox_pending(run_id)] == ["cancel"]  # the executing process takes it


async def test_cancels_of_one_parked_run_from_many_callers_end_it_once(store: Store) -> None:
    run_id, _ = await parked_run(store, "touch a")
    outcomes = await asyncio.gather(*(cancel_run(store, run_id) for _ in range(4)), return_exceptions=True)
    for outcome in outcomes:  # each one ended it, found it ended, or was refused because it had ended
        assert getattr(outcome, "status", None) == "cancelled" or getattr(outcome, "code", None) == "run_not_running"
    assert (await store.get_run(run_id)).status == "cancelled"
    assert await store.inbox_pending(run_id) == [] or all(
        m["kind"] == "gate_decision" for m in await store.inbox_pending(run_id)
    )  # no cancel is left for a resume to act on
    methods = [entry["method"] for entry in await read_log(store, run_id)]
    assert methods.count("_baton/status") == 2 and methods.count("_baton/gate_resolved") == 1


async def test_a_parked_run_with_a_pending_gate_is_no_work_whatever_its_inbox_holds(
    store_url: str, tmp_path: Path
) -> None:
    settings = Settings.load({"BATON_HOME": str(tmp_path / "home"), "PATH": ""}, database_url=store_url)
    async with Baton(settings) as baton:
        run_id, _ = await parked_run(baton.store, "touch a")
        await post_command(baton.store, run_id, "set_permission_mode", {"permission_mode": "plan"})
        reported: list[str] = []
        adopter = Adopter(baton, report=reported.append)
        assert run_id not in [record.id for record in await adopter.candidates()]
        assert await adopter.scan() == [] and reported == []  # no "not adopting … run_paused" every scan


async def read_log(store: Store, run_id: str) -> list[dict[str, object]]:
    async with SessionLog(store, Redactor()) as log:
        return [dict(entry) for entry in await log.read(run_id)]
