"""Human gates inside a run, with the real Claude Code (scripted): wait, decide, park, resume.

Decisions are recorded through the ledger (``GateLedger.decide``) the way any process does it:
the run learns of them through its inbox (``gate_decision``), never from this test directly.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from baton.agents.processes import run_process_ids
from baton.config import Settings
from baton.events.entry import LogEntry
from baton.events.project import project
from baton.gates.ledger import GateLedger, GateRecord
from baton.runs import Baton, RunSpec
from baton.store import Store
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.claude

MODEL_KEY = "sk-scripted-gates-key-0123456789abcdef"


@contextmanager
def scripted(settings: Settings, scenario: str, **changes: Any) -> Iterator[tuple[Settings, ScriptedModelServer]]:
    with ScriptedModelServer(scenario) as server:
        yield replace(settings, anthropic_base_url=server.base_url, anthropic_api_key=MODEL_KEY, **changes), server


async def next_gate(store: Store, run_id: str, seen: int = 0, within: float = 30) -> GateRecord:
    """The run's next pending gate (its ``seen + 1``-th gate overall)."""
    ledger = GateLedger(store)
    async with asyncio.timeout(within):
        while True:
            gates = await ledger.list(run_id=run_id)
            if len(gates) > seen:
                pending = [gate for gate in gates if gate.status == "pending"]
                if pending:
                    return pending[0]
            await asyncio.sleep(0.02)


async def until_status(store: Store, run_id: str, status: str) -> None:
    async with asyncio.timeout(10):
        while True:
            if (await store.get_run(run_id)).status == status:
                return
            await asyncio.sleep(0.01)


def binding(gate: GateRecord) -> dict[str, Any]:
    return {"bound_call_id": gate.bound_call_id, "bound_input_hash": gate.bound_input_hash}


async def decide(store: Store, gate: GateRecord, **body: Any) -> GateRecord:
    return await GateLedger(store).decide(gate.id, {**binding(gate), **body}, decided_by="test")


def methods(entries: list[LogEntry]) -> list[str]:
    return [entry["method"] for entry in entries]


def params_of(entries: list[LogEntry], method: str) -> list[dict[str, Any]]:
    return [entry["payload"]["params"] for entry in entries if entry["method"] == method]


def answers(entries: list[LogEntry]) -> list[dict[str, Any]]:
    """The host's ``_meta.baton`` of every permission answer, in order."""
    found = []
    for entry in entries:
        if entry["method"] == "session/request_permission" and entry["direction"] == "to_agent":
            found.append(entry["payload"]["result"]["_meta"]["baton"])
    return found


async def test_approve_runs_the_call_and_the_run_is_paused_only_while_the_gate_waits(
    settings: Settings, repo: Path
) -> None:
    with scripted(settings, "needs-approval") as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo))
            gate = await next_gate(baton.store, handle.run_id)
            assert gate.kind == "tool" and gate.tool_name == "Bash"
            assert gate.input is not None and gate.input["command"] == "touch approved.txt"
            await until_status(baton.store, handle.run_id, "paused")
            await decide(baton.store, gate, decision="approve")
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
            transitions = [(t.from_status, t.to_status) for t in await baton.store.list_transitions(handle.run_id)]
    assert outcome.status == "finished", outcome
    assert (repo / "approved.txt").exists()
    order = methods(entries)
    assert order.index("_baton/gate_opened") < order.index("_baton/gate_resolved")
    assert params_of(entries, "_baton/gate_opened")[0]["gate_id"] == gate.id
    [resolved] = params_of(entries, "_baton/gate_resolved")
    assert resolved["decision"] == "approve" and resolved["decided_by"] == "test"
    [answer] = answers(entries)
    assert answer["decision"] == "allow" and answer["reason"] == "human" and answer["gate_id"] == gate.id
    assert ("running", "paused") in transitions and ("paused", "running") in transitions
    assert transitions[-1][1] == "finished"


async def test_deny_shows_the_reason_to_the_agent(settings: Settings, repo: Path) -> None:
    with scripted(settings, "needs-approval") as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo))
            gate = await next_gate(baton.store, handle.run_id)
            await decide(baton.store, gate, decision="deny", reason="not in this repository")
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished"
    assert not (repo / "approved.txt").exists()
    assert "not in this repository" in (outcome.result or "")
    [answer] = answers(entries)
    assert answer["decision"] == "deny" and "not in this repository" in answer["message"]


async def test_deny_with_interrupt_ends_the_turn(settings: Settings, repo: Path) -> None:
    with scripted(settings, "needs-approval") as (configured, server):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo))
            gate = await next_gate(baton.store, handle.run_id)
            asked = len(server.requests)
            await decide(baton.store, gate, decision="deny", reason="stop here", interrupt=True)
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished"
    assert not (repo / "approved.txt").exists()
    [answer] = answers(entries)
    assert answer["decision"] == "deny" and answer["interrupt"] is True
    # The turn ended with the denial: the model was not asked to go on.
    assert [r for r in server.requests[asked:] if r.scenario is not None] == []


async def test_approve_with_edit_runs_the_edited_command(settings: Settings, repo: Path) -> None:
    with scripted(settings, "needs-approval") as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo))
            gate = await next_gate(baton.store, handle.run_id)
            edited = {**(gate.input or {}), "command": "touch edited.txt"}
            await decide(baton.store, gate, decision="approve", updated_input=edited)
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished"
    assert (repo / "edited.txt").exists() and not (repo / "approved.txt").exists()
    [answer] = answers(entries)
    assert answer["updated_input"]["command"] == "touch edited.txt"
    # The events say what ran, that it was edited, and by whom.
    [finished] = [event["data"] for event in project(entries) if event["type"] == "command.finished"]
    assert finished["command"] == "touch edited.txt" and finished["edited"] is True
    assert finished["edited_by"] == "test" and finished["original_command"] == "touch approved.txt"


async def test_remember_for_the_session_allows_the_suggested_rule_only(settings: Settings, repo: Path) -> None:
    with scripted(settings, "gate-twice") as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo))
            first = await next_gate(baton.store, handle.run_id)
            decided = await decide(baton.store, first, decision="approve", remember="session")
            rule = (decided.decision or {})["remember_rule"]
            third = await next_gate(baton.store, handle.run_id, seen=1)
            assert third.input is not None and third.input["command"] == "rm -rf one"
            await decide(baton.store, third, decision="deny", reason="keep it")
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished"
    assert rule == "Bash(mkdir:*)"
    assert (repo / "one").is_dir() and (repo / "two").is_dir()
    reasons = [answer["reason"] for answer in answers(entries)]
    assert reasons == ["human", f"session_rule:{rule}", "keep it"] or reasons[:2] == ["human", f"session_rule:{rule}"]
    assert params_of(entries, "_baton/session_rule") == [{"rule": rule, "gate_id": first.id}]
    assert len(params_of(entries, "_baton/gate_opened")) == 2


async def test_expiry_while_waiting_is_a_timeout_denial(settings: Settings, repo: Path) -> None:
    with scripted(settings, "needs-approval", gate_expiry_seconds=0.5) as (configured, _):
        async with Baton(configured) as baton:
            outcome = await baton.run(RunSpec(prompt="go", repo=repo))
            entries = await baton.log.read(outcome.run_id)
            [gate] = await GateLedger(baton.store).list(run_id=outcome.run_id)
    assert outcome.status == "finished"
    assert not (repo / "approved.txt").exists()
    assert gate.status in ("denied", "expired") and (gate.decision or {}).get("reason") == "timeout"
    [answer] = answers(entries)
    assert answer["decision"] == "deny" and answer["reason"] == "timeout"


async def test_a_run_parks_after_the_grace_period_and_resumes_on_a_decision_from_another_process(
    settings: Settings, repo: Path
) -> None:
    with scripted(settings, "gate-park", gate_grace_seconds=0.5) as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo))
            parked = await handle.wait(through_parks=False)
            assert parked.status == "paused" and parked.exit_code == 4
            record = await baton.store.get_run(handle.run_id)
            assert record.status == "paused" and record.executor_id is None
            assert run_process_ids(handle.run_id) == []  # no agent process is left
            [gate] = await GateLedger(baton.store).list(run_id=handle.run_id)
            assert gate.status == "pending" and parked.gate_id == gate.id
            await asyncio.to_thread(decide_elsewhere, configured, gate, {"decision": "approve"})
            assert await handle.continue_parked(parked) is None
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
            used = await GateLedger(baton.store).get(gate.id)
    assert outcome.status == "finished", outcome
    assert (repo / "approved.txt").exists()
    assert "Resumed after the decision" in (outcome.result or "")
    [park] = [p for p in params_of(entries, "_baton/status") if p["status"] == "paused"]
    assert park["gate_id"] == gate.id
    [resume] = params_of(entries, "_baton/resume")
    assert resume["decided_gates"] == [gate.id] and "[baton:approved Bash]" in resume["prompt"]
    # Claude deferred the call, then re-evaluated the same call on resume: the approved gate allowed it.
    [allowed] = [a for a in answers(entries) if a["decision"] == "allow"]
    assert allowed["bound_call_id"] == gate.bound_call_id and allowed["gate_id"] == gate.id
    assert [a["decision"] for a in answers(entries)] == ["defer", "allow"]
    assert params_of(entries, "_baton/gate_used")[0]["gate_id"] == gate.id
    assert (used.decision or {}).get("used_by_call_id") == gate.tool_call_id


async def test_after_a_park_a_different_call_is_gated_again(settings: Settings, repo: Path) -> None:
    with scripted(settings, "gate-park-second", gate_grace_seconds=0.5) as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo))
            parked = await handle.wait(through_parks=False)
            assert parked.status == "paused"
            first = await GateLedger(baton.store).get(parked.gate_id or "")
            await decide(baton.store, first, decision="approve")
            waiting = asyncio.create_task(handle.wait())
            second = await next_gate(baton.store, handle.run_id, seen=1)
            assert second.id != first.id and second.input is not None
            assert second.input["command"] == "touch second.txt"
            await decide(baton.store, second, decision="deny", reason="one file is enough")
            outcome = await waiting
    assert outcome.status == "finished"
    assert (repo / "approved.txt").exists() and not (repo / "second.txt").exists()


async def test_cancel_of_a_parked_run_denies_its_gate_and_ends_it(settings: Settings, repo: Path) -> None:
    with scripted(settings, "gate-park", gate_grace_seconds=0.5) as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo))
            parked = await handle.wait(through_parks=False)
            assert parked.status == "paused"
            waiting = asyncio.create_task(handle.wait())
            await asyncio.sleep(0.1)
            await baton.cancel(handle.run_id)
            outcome = await waiting
            gate = await GateLedger(baton.store).get(parked.gate_id or "")
            record = await baton.store.get_run(handle.run_id)
    assert outcome.status == "cancelled" and outcome.exit_code == 5
    assert record.status == "cancelled"
    assert gate.status == "denied" and (gate.decision or {}).get("reason") == "cancelled"
    assert (gate.decision or {}).get("interrupt") is True
    assert not (repo / "approved.txt").exists()


async def test_a_parked_run_is_not_resumed_before_its_gate_is_decided(settings: Settings, repo: Path) -> None:
    from baton.errors import RefusedError

    with scripted(settings, "gate-park", gate_grace_seconds=0.5) as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo))
            assert (await handle.wait(through_parks=False)).status == "paused"
            with pytest.raises(RefusedError) as refused:
                await baton.resume(handle.run_id)
            assert refused.value.code == "run_paused"
            await baton.cancel(handle.run_id)


def decide_elsewhere(settings: Settings, gate: GateRecord, body: dict[str, Any]) -> None:
    """Decide the gate from another process (a fresh interpreter on the same store)."""
    script = (
        "import asyncio, json, sys\n"
        "from baton.gates.ledger import GateLedger\n"
        "from baton.store import Store\n"
        "async def main():\n"
        "    store = Store.open(sys.argv[1])\n"
        "    try:\n"
        "        await GateLedger(store).decide(sys.argv[2], json.loads(sys.argv[3]), decided_by='elsewhere')\n"
        "    finally:\n"
        "        await store.aclose()\n"
        "asyncio.run(main())\n"
    )
    payload = json.dumps({**binding(gate), **body})
    subprocess.run(
        [sys.executable, "-c", script, settings.resolved_database_url, gate.id, payload], check=True, timeout=60
    )


async def test_an_allow_all_policy_the_agent_writes_gains_it_nothing(settings: Settings, repo: Path) -> None:
    with scripted(settings, "policy-escape") as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo, permission_mode="acceptEdits"))
            written = await next_gate(baton.store, handle.run_id)
            assert written.tool_name == "Write" and written.input is not None
            assert written.input["file_path"].endswith(".baton/policy.toml")  # protected: asks in every mode
            await decide(baton.store, written, decision="approve")
            command = await next_gate(baton.store, handle.run_id, seen=1)
            assert command.tool_name == "Bash"  # still asks: the policy is HEAD's, read when the run started
            await decide(baton.store, command, decision="deny", reason="no")
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished"
    assert (repo / ".baton" / "policy.toml").exists() and not (repo / "approved.txt").exists()
    reasons = [params["reason"] for params in params_of(entries, "_baton/gate_opened")]
    assert reasons[0].startswith("protected_path:") and reasons[1] == "mode:acceptEdits"
