"""Human gates with codex-acp (scripted): approve and deny while Codex waits, and a park: Codex is
stopped with its request unanswered, and on resume the re-proposed call is allowed by its binding."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from tests.agents.conftest import gated_run, scripted_openai
from tests.runs.test_gates_claude import answers, decide, next_gate, params_of

from baton.agents.processes import run_process_ids
from baton.config import Settings
from baton.errors import BatonError
from baton.events.project import project
from baton.gates.ledger import GateLedger
from baton.runs import Baton, RunSpec

pytestmark = pytest.mark.timeout(120)


async def test_codex_waits_for_an_approval(settings: Settings, repo: Path) -> None:
    outcome, entries = await gated_run(settings, repo, "codex", {"decision": "approve"})
    assert outcome.status == "finished", outcome
    assert (repo / "approved.txt").exists()
    [answer] = answers(entries)
    assert answer["decision"] == "allow" and answer["reason"] == "human"


async def test_codex_gets_a_denial(settings: Settings, repo: Path) -> None:
    outcome, entries = await gated_run(settings, repo, "codex", {"decision": "deny", "reason": "no"})
    assert outcome.status == "finished"
    assert not (repo / "approved.txt").exists()
    [answer] = answers(entries)
    assert answer["decision"] == "deny"


async def test_an_edited_approval_is_refused_and_codex_runs_only_what_is_approved_unedited(
    settings: Settings, repo: Path
) -> None:
    # codex-acp's permission answer is an option: it would run the proposed command, not the edit.
    with scripted_openai(settings, "needs-approval") as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo, agent="codex"))
            gate = await baton.gate((await next_gate(baton.store, handle.run_id, within=60)).id)
            proposed = gate.record.input or {}
            assert proposed["command"] == "touch approved.txt"
            with pytest.raises(BatonError) as refused:
                await gate.approve(updated_input={**proposed, "command": "touch edited.txt"})
            assert refused.value.code == "edit_not_supported" and "codex" in refused.value.message
            assert (await gate.refresh()).status == "pending"
            assert answers(await baton.log.read(handle.run_id)) == []  # Codex still waits, unanswered
            assert not (repo / "approved.txt").exists()
            await gate.approve()
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished", outcome
    assert (repo / "approved.txt").exists() and not (repo / "edited.txt").exists()
    [answer] = answers(entries)
    assert answer["decision"] == "allow" and "updated_input" not in answer
    finished = [event["data"] for event in project(entries) if event["type"] == "command.finished"]
    assert [data["command"] for data in finished] == ["touch approved.txt"] and "edited" not in finished[0]


async def test_a_parked_codex_run_is_stopped_and_its_re_proposed_call_allowed_on_resume(
    settings: Settings, repo: Path
) -> None:
    with scripted_openai(settings, "gate-park") as (configured, _):
        configured = replace(configured, gate_grace_seconds=0.5)
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo, agent="codex"))
            parked = await handle.wait(through_parks=False)
            assert parked.status == "paused", parked
            assert run_process_ids(handle.run_id) == []
            gate = await GateLedger(baton.store).get(parked.gate_id or "")
            await decide(baton.store, gate, decision="approve")
            outcome = await asyncio.wait_for(handle.wait(), 120)
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished", outcome
    assert (repo / "approved.txt").exists()
    [resume] = params_of(entries, "_baton/resume")
    assert "[baton:approved-rerun Bash]" in resume["prompt"]
    [used] = params_of(entries, "_baton/gate_used")
    assert used["gate_id"] == gate.id and used["bound_call_id"] == gate.bound_call_id
    assert used["call_id"] != gate.bound_call_id  # a new proposal, allowed by its binding
