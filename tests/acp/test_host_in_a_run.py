"""The host inside a real run (``Baton.start``, interactive) of ``acp_script_agent.py features``:
what the agent says after its turn ended is logged tagged ``after_turn`` between that turn's
``_baton/turn_complete`` and the next prompt, and is not the next turn's usage; a permission
request the agent withdraws (``$/cancel_request``) while its gate waits for a human resolves
the gate ``cancelled``, is answered -32800, and the run goes on to finish.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.agents.conftest import first_entry, script_entry

from baton.acp.cancel import REQUEST_CANCELLED
from baton.agents.registry import AGENTS
from baton.config import Settings
from baton.events.entry import LogEntry
from baton.events.project import project
from baton.runs import Baton, RunSpec

pytestmark = pytest.mark.timeout(60)


def _update(entry: LogEntry) -> dict[str, Any]:
    update = (entry["payload"].get("params") or {}).get("update")
    return update if isinstance(update, dict) else {}


def _late_usage(entry: LogEntry) -> bool:
    update = _update(entry)
    return update.get("sessionUpdate") == "usage_update" and update.get("_meta", {}).get("baton", {}).get("after_turn")


async def test_late_updates_and_a_withdrawn_request_in_a_run(
    settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = script_entry("features")
    monkeypatch.setitem(AGENTS, entry.name, entry)
    configured = replace(settings, openai_api_key="sk-unused-by-the-script-agent")
    spec = RunSpec(prompt="add a test", repo=repo, agent=entry.name, run_mode="interactive")
    async with Baton(configured) as baton:
        handle = await baton.start(spec)
        # The next prompt goes once the first turn's after-turn usage is in the log.
        await first_entry(baton.entries(handle.run_id), _late_usage)
        await handle.send("withdraw")
        await first_entry(baton.entries(handle.run_id), lambda e: e["method"] == "_baton/gate_resolved")
        await handle.close()
        outcome = await handle.wait()
        entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished", outcome

    methods = [(e["direction"], e["method"]) for e in entries]
    completes = [i for i, m in enumerate(methods) if m[1] == "_baton/turn_complete"]
    prompts = [i for i, m in enumerate(methods) if m == ("to_agent", "session/prompt")]
    answers = [i for i, m in enumerate(methods) if m == ("from_agent", "session/prompt")]
    late = [i for i, e in enumerate(entries) if _update(e).get("_meta", {}).get("baton", {}).get("after_turn")]
    assert [_update(entries[i])["sessionUpdate"] for i in late[:2]] == ["agent_message_chunk", "usage_update"]
    assert all(answers[0] < i < prompts[1] for i in late[:2])  # after the turn's answer, before the next prompt
    first_turn = entries[completes[0]]["payload"]["params"]
    assert first_turn["total_cost_usd"] == 0.01  # the turn's own usage_update, not the later one
    assert first_turn["usage"]["inputTokens"] == 100

    gates = [e["data"] for e in project(entries) if e["type"].startswith("gate.")]
    assert [g.get("decision") for g in gates] == [None, "deny"] and gates[1]["reason"] == "withdrawn"
    reply = next(e for e in entries if e["method"] == "session/request_permission" and e["direction"] == "to_agent")
    assert reply["payload"]["error"]["code"] == REQUEST_CANCELLED
    assert not (repo / "withdrawn.txt").exists()
    said = [e["data"]["text"] for e in project(entries) if e["type"] == "message" and e["data"]["role"] == "agent"]
    assert said[:2] == ["turn 1: add a test", "late 1"] and str(REQUEST_CANCELLED) in said[2]


async def test_a_withdrawn_request_denies_its_own_gate_only(
    settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two permission requests wait for gates at once (a command's, a plan's review); the agent
    withdraws the command's. Its gate is denied (``withdrawn``, by the agent); the plan's stays
    pending, is approved, and the agent carries it out."""
    entry = script_entry("features")
    monkeypatch.setitem(AGENTS, entry.name, entry)
    configured = replace(settings, openai_api_key="sk-unused-by-the-script-agent")
    spec = RunSpec(prompt="withdraw one", repo=repo, agent=entry.name, run_mode="interactive")

    def opened_for(call_id: str) -> Callable[[LogEntry], bool]:
        return lambda e: e["method"] == "_baton/gate_opened" and e["payload"]["params"]["tool_call_id"] == call_id

    async with Baton(configured) as baton:
        handle = await baton.start(spec)
        # Both gates opened (the withdrawal may come before the plan's gate opens), the first resolved.
        await first_entry(baton.entries(handle.run_id), opened_for("kept-1"))
        await first_entry(baton.entries(handle.run_id), lambda e: e["method"] == "_baton/gate_resolved")
        pending = await baton.gates(run_id=handle.run_id, status="pending")
        assert [g.record.tool_call_id for g in pending] == ["kept-1"]
        await pending[0].review_plan("approve")
        await first_entry(
            baton.entries(handle.run_id),
            lambda e: e["method"] == "_baton/turn_complete",
        )
        await handle.close()
        outcome = await handle.wait()
        entries = await baton.log.read(handle.run_id)
        decided = {g.record.tool_call_id: g.record for g in await baton.gates(run_id=handle.run_id)}
    assert outcome.status == "finished", outcome
    assert decided["withdrawn-1"].status == "denied" and decided["withdrawn-1"].decided_by == "agent"
    assert (decided["withdrawn-1"].decision or {}).get("reason") == "withdrawn"
    assert decided["kept-1"].status == "approved"
    assert (repo / "kept.txt").exists() and not (repo / "withdrawn.txt").exists()
    said = [e["data"]["text"] for e in project(entries) if e["type"] == "message" and e["data"]["role"] == "agent"]
    assert str(REQUEST_CANCELLED) in said[0] and '"optionId": "yes"' in said[1]


async def test_two_commands_asked_about_at_once_each_keep_their_gate(
    settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent asks about two commands at once (ACP lets it): the second gate does not
    supersede the first, whose request still waits; both are approved and both commands run."""
    entry = script_entry("features")
    monkeypatch.setitem(AGENTS, entry.name, entry)
    configured = replace(settings, openai_api_key="sk-unused-by-the-script-agent")
    spec = RunSpec(prompt="two at once", repo=repo, agent=entry.name, run_mode="interactive")

    def opened_for(call_id: str) -> Callable[[LogEntry], bool]:
        return lambda e: e["method"] == "_baton/gate_opened" and e["payload"]["params"]["tool_call_id"] == call_id

    async with Baton(configured) as baton:
        handle = await baton.start(spec)
        await first_entry(baton.entries(handle.run_id), opened_for("one-1"))
        await first_entry(baton.entries(handle.run_id), opened_for("two-1"))
        pending = await baton.gates(run_id=handle.run_id, status="pending")
        assert sorted(g.record.tool_call_id or "" for g in pending) == ["one-1", "two-1"]
        for gate in pending:
            await gate.approve()
        await first_entry(baton.entries(handle.run_id), lambda e: e["method"] == "_baton/turn_complete")
        await handle.close()
        outcome = await handle.wait()
        decided = await baton.gates(run_id=handle.run_id)
    assert outcome.status == "finished", outcome
    assert sorted((g.record.tool_call_id, g.record.status) for g in decided) == [
        ("one-1", "approved"),
        ("two-1", "approved"),
    ]
    assert (repo / "one.txt").exists() and (repo / "two.txt").exists()
