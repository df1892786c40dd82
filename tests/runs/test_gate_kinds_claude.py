"""Questions and plan reviews with the real Claude Code (scripted): what the model reads back.

The scripted model server records every request, so each test checks the tool result Claude
Code sent the model after the decision (docs/gates.md, "What Claude Code does with an answer").
Decisions go through the ledger like any process's (``GateLedger.decide``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.runs.test_gates_claude import answers, binding, next_gate, params_of, scripted

from baton.config import Settings
from baton.errors import GateError
from baton.gates.ledger import GateLedger, GateRecord
from baton.runs import Baton, RunSpec
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.claude

ANSWERS = [{"header": "Database", "selected": ["SQLite"]}, {"header": "Extras", "selected": ["Caching", "Metrics"]}]


def tool_results(server: ScriptedModelServer) -> list[str]:
    """The text of every tool result the model was sent (the last request holds them all)."""
    found: list[str] = []
    for message in [r for r in server.requests if r.scenario][-1].body["messages"]:
        for block in message.get("content") or [] if isinstance(message.get("content"), list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                content = block.get("content")
                found.append(content if isinstance(content, str) else json.dumps(content))
    return found


async def answer(baton: Baton, gate: GateRecord, **body: Any) -> GateRecord:
    return await GateLedger(baton.store).decide(gate.id, {**binding(gate), **body}, decided_by="test")


async def review(baton: Baton, gate: GateRecord, **body: Any) -> GateRecord:
    """A plan decision (plan reviews carry no binding), as ``baton review-plan`` sends it."""
    return await GateLedger(baton.store).decide(gate.id, body, decided_by="test", kind="plan_review")


async def test_a_question_is_answered_and_the_model_reads_the_answers(settings: Settings, repo: Path) -> None:
    with scripted(settings, "ask-question") as (configured, server):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo, permission_mode="acceptEdits"))
            gate = await next_gate(baton.store, handle.run_id)
            assert gate.kind == "question" and gate.tool_name == "AskUserQuestion"
            assert gate.summary == "2 question(s): Database, Extras"
            assert gate.questions is not None and [q["header"] for q in gate.questions] == ["Database", "Extras"]
            assert [o["label"] for o in gate.questions[1]["options"]] == ["Caching", "Metrics"]
            with pytest.raises(GateError) as refused:  # an option not offered… for a single-select, two
                await answer(baton, gate, decision="answer", answers=[{**ANSWERS[0], "selected": ["A", "B"]}])
            assert refused.value.code == "answer_invalid"
            decided = await answer(baton, gate, decision="answer", answers=ANSWERS)
            assert decided.status == "answered"
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished", outcome
    expected = (
        'Your questions have been answered: "Which database should I use?"="SQLite", '
        '"Which extras do you want?"="Caching, Metrics". You can now continue with these answers in mind.'
    )
    assert tool_results(server) == [expected]
    assert outcome.result == f"Answered. Tool result: {expected}"
    [allowed] = answers(entries)
    assert allowed["decision"] == "allow" and allowed["gate_id"] == gate.id
    [resolved] = params_of(entries, "_baton/gate_resolved")
    assert resolved["decision"] == "answer" and resolved["decided_by"] == "test"


async def test_the_users_own_text_is_an_answer(settings: Settings, repo: Path) -> None:
    with scripted(settings, "ask-question") as (configured, server):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo))
            gate = await next_gate(baton.store, handle.run_id)
            own = [{"header": "Database", "selected": ["DuckDB"], "note": "embedded"}, ANSWERS[1]]
            await answer(baton, gate, decision="answer", answers=own)
            outcome = await handle.wait()
    assert outcome.status == "finished", outcome
    assert '"Which database should I use?"="DuckDB — embedded"' in tool_results(server)[0]


async def test_a_denied_question_tells_the_model_nobody_answered(settings: Settings, repo: Path) -> None:
    with scripted(settings, "ask-question") as (configured, server):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo))
            gate = await next_gate(baton.store, handle.run_id)
            await GateLedger(baton.store).decide(gate.id, {"decision": "deny", "reason": "ask later"}, decided_by="t")
            outcome = await handle.wait()
    assert outcome.status == "finished", outcome
    [result] = tool_results(server)
    assert "The user did not answer the questions (ask later)." in result


def plan_spec(repo: Path) -> RunSpec:
    return RunSpec(prompt="go", repo=repo, permission_mode="plan", allow=("Bash(echo:*)",))


async def test_a_plan_approved_leaves_plan_mode_and_the_work_starts(settings: Settings, repo: Path) -> None:
    with scripted(settings, "plan-review") as (configured, server):
        async with Baton(configured) as baton:
            handle = await baton.start(plan_spec(repo))
            gate = await next_gate(baton.store, handle.run_id)
            assert gate.kind == "plan_review" and gate.tool_name == "ExitPlanMode"
            assert gate.plan == "# Fix add\n\n1. Read calc.js\n2. Make add return a + b\n"
            assert gate.summary == "Fix add"
            await review(baton, gate, decision="approve")
            outcome = await handle.wait()
            record = await baton.store.get_run(handle.run_id)
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished", outcome
    write, reviewed, bash = tool_results(server)
    assert "File created successfully" in write
    assert reviewed.startswith("User has approved your plan. You can now start coding.")
    assert reviewed.endswith("## Approved Plan:\n# Fix add\n\n1. Read calc.js\n2. Make add return a + b\n")
    assert bash.strip() == "after-plan"  # default mode now: the allow rule runs it
    assert record.permission_mode == "default"
    plan_file = [a for a in answers(entries) if a.get("reason") == "plan_file"]
    assert len(plan_file) == 1 and plan_file[0]["decision"] == "allow"


async def test_an_edited_plan_is_what_the_model_reads(settings: Settings, repo: Path) -> None:
    edited = "# Fix add\n\n1. Make add return a + b\n2. Run node --test\n"
    with scripted(settings, "plan-review") as (configured, server):
        async with Baton(configured) as baton:
            handle = await baton.start(plan_spec(repo))
            gate = await next_gate(baton.store, handle.run_id)
            await review(baton, gate, decision="edit", edited_plan=edited)
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished", outcome
    _write, reviewed, bash = tool_results(server)
    assert reviewed.endswith(f"## Approved Plan (edited by user):\n{edited}")
    assert bash.strip() == "after-plan"
    # the host was asked once for the plan: can_use_tool took the edit without asking again
    assert len([e for e in entries if e["method"] == "_baton/gate_opened"]) == 1
    assert len([a for a in answers(entries) if a.get("gate_id") == gate.id]) == 1


async def test_a_rejected_plan_keeps_the_run_planning(settings: Settings, repo: Path) -> None:
    with scripted(settings, "plan-review") as (configured, server):
        async with Baton(configured) as baton:
            handle = await baton.start(plan_spec(repo))
            gate = await next_gate(baton.store, handle.run_id)
            with pytest.raises(GateError) as refused:
                await review(baton, gate, decision="reject", edited_plan="no")
            assert refused.value.code == "plan_edit_invalid"
            await review(baton, gate, decision="reject", reason="read the tests first")
            outcome = await handle.wait()
            record = await baton.store.get_run(handle.run_id)
    assert outcome.status == "finished", outcome
    _write, reviewed, bash = tool_results(server)
    assert reviewed == (
        "PreToolUse:ExitPlanMode hook error: The user rejected the plan: read the tests first. "
        "Keep planning; do not start the work."
    )
    assert "Plan mode is read-only" in bash
    assert record.permission_mode == "plan"
