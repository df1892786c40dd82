"""The gate ledger on SQLite and Postgres: opening, superseding, every decision and refusal,
expiry, cancel, and two processes deciding the same gate at once."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from baton.errors import BatonError
from baton.gates.ledger import GateLedger, GateRecord
from baton.store import Store

QUESTIONS = [
    {
        "question": "Which database?",
        "header": "Database",
        "options": [{"label": "SQLite", "description": "a file"}, {"label": "Postgres", "description": "a server"}],
        "multiSelect": False,
    },
    {
        "question": "Which extras?",
        "header": "Extras",
        "options": [{"label": "docs"}, {"label": "tests"}],
        "multiSelect": True,
    },
]


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    async with Store.open(store_url) as opened:
        yield opened


@pytest.fixture
def ledger(store: Store) -> GateLedger:
    return GateLedger(store)


@pytest.fixture
async def run_id(store: Store) -> str:
    return (await store.create_run(agent="claude", owner="alice")).id


async def tool_gate(ledger: GateLedger, run_id: str, command: str = "npm test", **extra: Any) -> GateRecord:
    gate, _ = await ledger.open(
        run_id,
        "tool",
        summary=f"Bash: {command}",
        tool_name="Bash",
        tool_call_id="toolu_1",
        bound_call_id="toolu_1",
        bound_input_hash="hash-" + command,
        input={"command": command},
        **extra,
    )
    return gate


def binding(gate: GateRecord) -> dict[str, Any]:
    return {"bound_call_id": gate.bound_call_id, "bound_input_hash": gate.bound_input_hash}


async def refused(code: str, awaitable: Any) -> BatonError:
    with pytest.raises(BatonError) as caught:
        await awaitable
    assert caught.value.code == code, caught.value
    return caught.value


async def decisions_in_inbox(store: Store, run_id: str) -> list[str]:
    return [m["payload"]["gate_id"] for m in await store.inbox_pending(run_id) if m["kind"] == "gate_decision"]


async def test_open_get_list_and_json(ledger: GateLedger, store: Store, run_id: str) -> None:
    gate = await tool_gate(ledger, run_id, expires_in_seconds=3600)
    assert gate.id.startswith("gate_") and gate.status == "pending" and gate.decision is None
    assert await ledger.get(gate.id) == gate
    assert gate.expires_at is not None and gate.expires_at > gate.created_at
    other = (await store.create_run(agent="codex", owner="bob")).id
    theirs = await tool_gate(ledger, other, "ls")
    assert [g.id for g in await ledger.list()] == [gate.id, theirs.id]
    assert [g.id for g in await ledger.list(run_id=other)] == [theirs.id]
    assert [g.id for g in await ledger.list(owner="alice")] == [gate.id]
    assert await ledger.list(status="approved") == []
    body = gate.to_json()
    assert body["run_id"] == run_id and body["input"] == {"command": "npm test"}
    assert "decision" not in body and "questions" not in body
    await refused("gate_not_found", ledger.get("gate_nope"))
    await refused("run_not_found", tool_gate(ledger, "run_nope"))
    await refused("invalid_argument", ledger.list(status="waiting"))


async def test_a_reproposal_with_another_input_supersedes(ledger: GateLedger, run_id: str) -> None:
    first = await tool_gate(ledger, run_id, "npm test")
    question, _ = await ledger.open(run_id, "question", summary="?", questions=QUESTIONS, bound_input_hash="q")
    same = await tool_gate(ledger, run_id, "npm test")
    assert (await ledger.get(first.id)).status == "pending"  # the same input: nothing superseded
    second, superseded = await ledger.open(
        run_id, "tool", summary="Bash: rm", tool_name="Bash", bound_call_id="toolu_2", bound_input_hash="other"
    )
    assert [g.id for g in superseded] == sorted([first.id, same.id])
    assert all(
        g.status == "superseded" and g.decision == {**g.decision, "superseded_by": second.id} for g in superseded
    )
    assert (await ledger.get(question.id)).status == "pending"  # another kind is left alone
    assert [g.id for g in await ledger.list(run_id=run_id, status="pending")] == [question.id, second.id]
    # A stale decision for the superseded gate changes nothing.
    error = await refused(
        "gate_not_pending", ledger.decide(first.id, {"decision": "approve", **binding(first)}, decided_by="h")
    )
    assert error.details["status"] == "superseded"


async def test_approve_records_the_decision_and_wakes_the_run(ledger: GateLedger, store: Store, run_id: str) -> None:
    gate = await tool_gate(ledger, run_id)
    decided = await ledger.decide(gate.id, {"decision": "approve", **binding(gate)}, decided_by="alice")
    assert decided.status == "approved" and decided.decided_by == "alice" and decided.decided_at
    assert decided.decision == {"decision": "approve", **binding(gate), "reason": "human"}
    assert await decisions_in_inbox(store, run_id) == [gate.id]
    assert decided.to_json()["decision"]["decision"] == "approve"


async def test_deny_and_deny_with_interrupt(ledger: GateLedger, run_id: str) -> None:
    plain = await tool_gate(ledger, run_id, "a")
    denied = await ledger.decide(plain.id, {"decision": "deny", "reason": "not now"}, decided_by="alice")
    assert denied.status == "denied"
    assert denied.decision == {"decision": "deny", "reason": "not now", "interrupt": False}
    hard = await tool_gate(ledger, run_id, "b")
    denied = await ledger.decide(hard.id, {"decision": "deny", "interrupt": True, **binding(hard)}, decided_by="bob")
    assert denied.decision is not None and denied.decision["interrupt"] is True and denied.decision["reason"] == "human"


async def test_approve_with_updated_input(ledger: GateLedger, run_id: str) -> None:
    gate = await tool_gate(ledger, run_id, "npm test")
    body = {"decision": "approve", **binding(gate), "updated_input": {"command": "npm test -- --bail"}}
    decided = await ledger.decide(gate.id, body, decided_by="alice")  # the run's agent is claude: it applies edits
    assert decided.decision is not None and decided.decision["updated_input"] == {"command": "npm test -- --bail"}
    other = await tool_gate(ledger, run_id, "x")
    body = {"decision": "approve", **binding(other), "updated_input": "ls"}
    error = await refused("invalid_argument", ledger.decide(other.id, body, decided_by="a"))
    assert error.details == {"field": "updated_input"}


@pytest.mark.parametrize(
    "agent", ["codex", "opencode", "gemini", "claude-acp", "qwen", "kilo", "command", "an-agent-from-elsewhere"]
)
async def test_an_edit_the_runs_agent_cannot_apply_is_refused_and_changes_nothing(
    ledger: GateLedger, store: Store, agent: str
) -> None:
    run_id = (await store.create_run(agent=agent)).id
    gate = await tool_gate(ledger, run_id, "rm -rf one")
    edited = {"decision": "approve", **binding(gate), "updated_input": {"command": "echo hi"}}
    error = await refused("edit_not_supported", ledger.decide(gate.id, edited, decided_by="alice"))
    assert error.details == {"gate_id": gate.id, "agent": agent, "field": "updated_input"}
    assert "approve it unedited or deny it" in error.message
    assert (await ledger.get(gate.id)).status == "pending" and await decisions_in_inbox(store, run_id) == []
    # The input as proposed is no edit: approved, and nothing in the decision claims an edit.
    same = {**edited, "updated_input": {"command": "rm -rf one"}}
    decided = await ledger.decide(gate.id, same, decided_by="alice")
    assert decided.status == "approved"
    assert decided.decision == {"decision": "approve", **binding(gate), "reason": "human"}
    assert (await ledger.decide(gate.id, same, decided_by="alice")) == decided  # a retry
    # A plan edit is refused the same way; the plan as proposed can still be approved.
    plan, _ = await ledger.open(run_id, "plan_review", summary="a plan", plan="1. x")
    body = {"decision": "edit", "edited_plan": "1. y"}
    error = await refused("edit_not_supported", ledger.decide(plan.id, body, decided_by="alice"))
    assert error.details["field"] == "edited_plan" and "as proposed" in error.message
    assert (await ledger.decide(plan.id, {"decision": "approve"}, decided_by="alice")).status == "approved"


async def test_remember_stores_the_suggested_rule_never_the_tool(ledger: GateLedger, run_id: str) -> None:
    gate = await tool_gate(ledger, run_id, "npm test -- --watch=false")
    decided = await ledger.decide(
        gate.id, {"decision": "approve", "remember": "session", **binding(gate)}, decided_by="a"
    )
    assert decided.decision is not None
    assert decided.decision["remember"] == "session" and decided.decision["remember_rule"] == "Bash(npm test:*)"
    # The rule follows the edited input when the human edited it.
    gate = await tool_gate(ledger, run_id, "npm test")
    body = {"decision": "approve", "remember": "session", "updated_input": {"command": "pytest -q"}, **binding(gate)}
    assert (await ledger.decide(gate.id, body, decided_by="a")).decision["remember_rule"] == "Bash(pytest:*)"  # type: ignore[index]
    # A compound command has no rule narrower than Bash: remember is refused, the gate stays pending.
    gate = await tool_gate(ledger, run_id, "npm test && rm -rf /")
    error = await refused(
        "invalid_argument",
        ledger.decide(gate.id, {"decision": "approve", "remember": "session", **binding(gate)}, decided_by="a"),
    )
    assert error.details == {"field": "remember"}
    assert (await ledger.get(gate.id)).status == "pending"
    await refused(
        "invalid_argument",
        ledger.decide(gate.id, {"decision": "approve", "remember": "forever", **binding(gate)}, decided_by="a"),
    )


async def test_a_forged_binding_changes_nothing(ledger: GateLedger, store: Store, run_id: str) -> None:
    gate = await tool_gate(ledger, run_id)
    for forged in ({"bound_input_hash": "0" * 64}, {"bound_call_id": "toolu_other"}):
        body = {"decision": "approve", **binding(gate), **forged}
        error = await refused("approval_binding_mismatch", ledger.decide(gate.id, body, decided_by="mallory"))
        assert error.details["field"] == next(iter(forged))
    # Approving needs the binding; a denial may leave it out but never get it wrong.
    error = await refused("invalid_argument", ledger.decide(gate.id, {"decision": "approve"}, decided_by="m"))
    assert error.details == {"field": "bound_call_id"}
    await refused(
        "approval_binding_mismatch",
        ledger.decide(gate.id, {"decision": "deny", "bound_input_hash": "x"}, decided_by="m"),
    )
    assert await ledger.get(gate.id) == gate
    assert await decisions_in_inbox(store, run_id) == []


async def test_the_same_decision_twice_is_a_safe_retry(ledger: GateLedger, store: Store, run_id: str) -> None:
    gate = await tool_gate(ledger, run_id)
    body = {"decision": "approve", **binding(gate)}
    first = await ledger.decide(gate.id, body, decided_by="alice")
    again = await ledger.decide(gate.id, body, decided_by="alice")
    assert again == first
    assert await decisions_in_inbox(store, run_id) == [gate.id]
    error = await refused("gate_not_pending", ledger.decide(gate.id, {"decision": "deny"}, decided_by="bob"))
    assert error.details["status"] == "approved" and error.details["decision"] == first.decision
    await refused("gate_not_pending", ledger.decide(gate.id, {**body, "reason": "other"}, decided_by="alice"))


async def test_answers_are_checked_against_the_questions(ledger: GateLedger, run_id: str) -> None:
    gate, _ = await ledger.open(
        run_id, "question", summary="2 questions", tool_name="AskUserQuestion", bound_call_id="toolu_q",
        bound_input_hash="hq", questions=QUESTIONS,
    )  # fmt: skip
    good = [{"header": "Database", "selected": ["Postgres"]}, {"header": "Extras", "selected": ["docs", "tests"]}]
    bad: list[tuple[list[Any], str]] = [
        ([*good, {"header": "Colour", "selected": ["red"]}], "Colour"),
        ([{"header": "Database", "selected": ["MySQL"]}, good[1]], "MySQL"),
        ([{"header": "Database", "selected": ["SQLite", "Postgres"]}, good[1]], "takes one option"),
        ([good[0]], "unanswered"),
        ([good[0], good[0], good[1]], "twice"),
        ([{"header": "Database", "selected": []}, good[1]], "non-empty"),
        ([], "non-empty"),
    ]
    for answers, words in bad:
        body = {"decision": "answer", "answers": answers, **binding(gate)}
        error = await refused("answer_invalid", ledger.decide(gate.id, body, decided_by="a"))
        assert words in error.message
    assert (await ledger.get(gate.id)).status == "pending"
    good[0]["note"] = "the shared one"
    answered = await ledger.decide(gate.id, {"decision": "answer", "answers": good, **binding(gate)}, decided_by="a")
    assert answered.status == "answered" and answered.decision is not None and answered.decision["answers"] == good
    await refused(
        "approval_binding_mismatch",
        ledger.decide(
            gate.id, {"decision": "answer", "answers": good, **binding(gate), "bound_input_hash": "x"}, decided_by="a"
        ),
    )


async def test_free_text_only_where_allowed(ledger: GateLedger, run_id: str) -> None:
    free = [{**QUESTIONS[0], "allow_free_text": True}]
    gate, _ = await ledger.open(
        run_id, "question", summary="?", bound_call_id="c", bound_input_hash="h", questions=free
    )
    body = {"decision": "answer", "answers": [{"header": "Database", "selected": ["DuckDB"]}], **binding(gate)}
    assert (await ledger.decide(gate.id, body, decided_by="a")).status == "answered"


async def test_plan_review(ledger: GateLedger, run_id: str) -> None:
    async def plan_gate() -> GateRecord:
        gate, _ = await ledger.open(run_id, "plan_review", summary="a plan", tool_name="ExitPlanMode", plan="1. x")
        return gate

    gate = await plan_gate()
    await refused("plan_edit_invalid", ledger.decide(gate.id, {"decision": "edit"}, decided_by="a"))
    await refused("plan_edit_invalid", ledger.decide(gate.id, {"decision": "edit", "edited_plan": " "}, decided_by="a"))
    await refused(
        "plan_edit_invalid", ledger.decide(gate.id, {"decision": "reject", "edited_plan": "2. y"}, decided_by="a")
    )
    edited = await ledger.decide(gate.id, {"decision": "edit", "edited_plan": "1. x\n2. y"}, decided_by="a")
    assert edited.status == "approved" and edited.decision == {
        "decision": "edit",
        "reason": "human",
        "edited_plan": "1. x\n2. y",
    }
    rejected = await ledger.decide((await plan_gate()).id, {"decision": "reject", "reason": "no"}, decided_by="a")
    assert rejected.status == "denied" and rejected.decision == {"decision": "reject", "reason": "no"}
    approved = await ledger.decide((await plan_gate()).id, {"decision": "approve"}, decided_by="a")
    assert approved.status == "approved"
    # A tool decision for a plan gate, and a plan decision for a tool gate.
    tool = await tool_gate(ledger, run_id)
    await refused(
        "gate_kind_mismatch", ledger.decide(tool.id, {"decision": "edit", "edited_plan": "p"}, decided_by="a")
    )
    await refused(
        "gate_kind_mismatch", ledger.decide(tool.id, {"decision": "approve"}, decided_by="a", kind="plan_review")
    )
    plan = await plan_gate()
    await refused(
        "gate_kind_mismatch", ledger.decide(plan.id, {"decision": "approve", **binding(tool)}, decided_by="a")
    )
    assert (await ledger.get(tool.id)).status == "pending" and (await ledger.get(plan.id)).status == "pending"


async def test_continue_resolves_only_a_resource_limit(ledger: GateLedger, run_id: str) -> None:
    tool = await tool_gate(ledger, run_id)
    await refused("gate_not_resumable", ledger.decide(tool.id, {"decision": "continue"}, decided_by="a"))
    limit, _ = await ledger.open(run_id, "resource_limit", summary="budget reached: usd 1.0")
    for budget in ({"usd": -1}, {"turns": 2.5}, {"dollars": 3}, {"turns": True}):
        await refused(
            "invalid_argument", ledger.decide(limit.id, {"decision": "continue", "budget": budget}, decided_by="a")
        )
    body = {"decision": "continue", "budget": {"usd": 2.5, "turns": 40}}
    resumed = await ledger.decide(limit.id, body, decided_by="a", kind="resource_limit")
    assert resumed.status == "approved" and resumed.decision is not None
    assert resumed.decision["budget"] == {"usd": 2.5, "turns": 40}


async def test_expiry_is_a_denial_with_reason_timeout(ledger: GateLedger, store: Store, run_id: str) -> None:
    run2 = (await store.create_run(agent="claude")).id
    later = await tool_gate(ledger, run_id, "b", expires_in_seconds=3600)
    due = await tool_gate(ledger, run2, "a", expires_in_seconds=60)
    assert await ledger.expire_due(now=datetime.now(UTC)) == []
    expired = await ledger.expire_due(run_id=run2, now=datetime.now(UTC) + timedelta(seconds=120))
    assert [g.id for g in expired] == [due.id]
    assert expired[0].status == "expired" and expired[0].decided_by == "timeout"
    assert expired[0].decision == {"decision": "deny", "reason": "timeout", "interrupt": False}
    assert await decisions_in_inbox(store, run2) == [due.id]
    assert (await ledger.get(later.id)).status == "pending"
    error = await refused(
        "gate_not_pending", ledger.decide(due.id, {"decision": "approve", **binding(due)}, decided_by="a")
    )
    assert error.details["status"] == "expired"


async def test_a_decision_after_the_deadline_finds_the_gate_expired(ledger: GateLedger, run_id: str) -> None:
    gate = await tool_gate(ledger, run_id, expires_in_seconds=0.001)
    await asyncio.sleep(0.01)
    error = await refused(
        "gate_not_pending", ledger.decide(gate.id, {"decision": "approve", **binding(gate)}, decided_by="a")
    )
    assert error.details["status"] == "expired"
    assert (await ledger.get(gate.id)).decided_by == "timeout"


async def test_cancel_denies_every_pending_gate(ledger: GateLedger, store: Store, run_id: str) -> None:
    tool = await tool_gate(ledger, run_id)
    plan, _ = await ledger.open(run_id, "plan_review", summary="plan", plan="p")
    done = await tool_gate(ledger, run_id, "npm test")  # same input as tool: both stay pending
    await ledger.decide(done.id, {"decision": "deny"}, decided_by="a")
    denied = await ledger.deny_all_pending(run_id, reason="cancelled", decided_by="alice")
    assert sorted(g.id for g in denied) == sorted([tool.id, plan.id])
    assert all(
        g.status == "denied" and g.decision == {"decision": "deny", "reason": "cancelled", "interrupt": True}
        for g in denied
    )
    assert await ledger.list(run_id=run_id, status="pending") == []
    assert await ledger.deny_all_pending(run_id, reason="cancelled", decided_by="alice") == []


async def test_pending_one_and_approved_for(ledger: GateLedger, run_id: str) -> None:
    await refused("gate_not_found", ledger.pending_one(run_id))
    first = await tool_gate(ledger, run_id)
    assert (await ledger.pending_one(run_id)).id == first.id
    plan, _ = await ledger.open(run_id, "plan_review", summary="plan", plan="p")
    error = await refused("gate_ambiguous", ledger.pending_one(run_id))
    assert sorted(error.details["gate_ids"]) == sorted([first.id, plan.id])
    assert (await ledger.pending_one(run_id, "plan_review")).id == plan.id
    assert await ledger.approved_for(run_id, "hash-npm test") is None
    await ledger.decide(first.id, {"decision": "approve", **binding(first)}, decided_by="a")
    approved = await ledger.approved_for(run_id, "hash-npm test")
    assert approved is not None and approved.id == first.id
    await ledger.mark_used(first.id, "call_2")
    await ledger.mark_used(first.id, "call_2")
    await refused("gate_not_pending", ledger.mark_used(first.id, "call_3"))
    assert (await ledger.get(first.id)).decision["used_by_call_id"] == "call_2"  # type: ignore[index]
    assert await ledger.approved_for(run_id, "hash-npm test") is None
    await refused("gate_not_pending", ledger.mark_used(plan.id, "call_4"))


_DECIDER = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from baton.errors import BatonError
    from baton.gates.ledger import GateLedger
    from baton.store import Store

    url, word, gate_ids = sys.argv[1], sys.argv[2], sys.argv[3:]

    async def main():
        async with Store.open(url) as store:
            ledger = GateLedger(store)
            gates = [await ledger.get(gate_id) for gate_id in gate_ids]  # connected and warm
            print("ready", flush=True)
            sys.stdin.readline()
            outcomes = []
            for gate in gates:
                body = {"decision": word}
                if word == "approve":
                    body.update(bound_call_id=gate.bound_call_id, bound_input_hash=gate.bound_input_hash)
                try:
                    await ledger.decide(gate.id, body, decided_by=f"pid-{os.getpid()}")
                    outcomes.append("won")
                except BatonError as exc:
                    outcomes.append(exc.code)
            print(json.dumps(outcomes), flush=True)

    asyncio.run(main())
    """
)


async def test_two_processes_deciding_at_once_exactly_one_wins(
    ledger: GateLedger, store: Store, store_url: str, run_id: str
) -> None:
    gates = [await tool_gate(ledger, run_id, "npm test") for _ in range(20)]  # one input: none superseded
    ids = [gate.id for gate in gates]
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _DECIDER,
            store_url,
            word,
            *ids,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for word in ("approve", "deny")
    ]
    for process in processes:
        assert process.stdout is not None
        assert await process.stdout.readline() == b"ready\n"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write(b"go\n")
        await process.stdin.drain()
    outputs = [json.loads((await p.communicate())[0]) for p in processes]
    assert all(p.returncode == 0 for p in processes)
    recorded = [await ledger.get(gate_id) for gate_id in ids]
    for n, gate in enumerate(recorded):
        outcomes = sorted([outputs[0][n], outputs[1][n]])
        assert outcomes == ["gate_not_pending", "won"], (n, outputs)
        winner = "approve" if outputs[0][n] == "won" else "deny"
        assert gate.decision is not None and gate.decision["decision"] == winner
    assert sorted(await decisions_in_inbox(store, run_id)) == sorted(ids)
