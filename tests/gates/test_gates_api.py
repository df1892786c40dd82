"""Gates from the Python API: ``await baton.gates(...)`` hands out handles that decide them."""

from __future__ import annotations

import getpass

import pytest

from baton.config import Settings
from baton.errors import BatonError
from baton.gates.handles import answers_from_selections
from baton.gates.ledger import GateLedger
from baton.runs import Baton
from baton.runs.parking import watch_gate


async def test_handles_decide_every_kind(settings: Settings) -> None:
    async with Baton(settings) as baton:
        ledger = GateLedger(baton.store)
        runs = [(await baton.store.create_run(agent="claude")).id for _ in range(5)]
        tool, _ = await ledger.open(
            runs[0], "tool", summary="Bash: npm test", tool_name="Bash", bound_call_id="c1", bound_input_hash="h1",
            input={"command": "npm test"},
        )  # fmt: skip
        questions = [{"header": "DB", "options": [{"label": "SQLite"}, {"label": "Postgres"}], "multiSelect": True}]
        question, _ = await ledger.open(
            runs[1], "question", summary="?", bound_call_id="c2", bound_input_hash="h2", questions=questions
        )
        plan, _ = await ledger.open(runs[2], "plan_review", summary="plan", plan="1. x")
        limit, _ = await ledger.open(runs[3], "resource_limit", summary="budget")
        other, _ = await ledger.open(runs[4], "tool", summary="Bash: rm", tool_name="Bash", bound_call_id="c3",
                                     bound_input_hash="h3", input={"command": "rm -rf build"})  # fmt: skip

        pending = await baton.gates(status="pending")
        # Oldest first; two gates opened within the same millisecond are ordered by id.
        opened = sorted([tool, question, plan, limit, other], key=lambda g: (g.created_at, g.id))
        assert [g.id for g in pending] == [g.id for g in opened]
        pending = sorted(pending, key=lambda g: [tool.id, question.id, plan.id, limit.id, other.id].index(g.id))
        assert [g.id for g in await baton.gates(run_id=runs[0])] == [tool.id]
        handle = pending[0]
        assert handle.kind == "tool" and handle.to_json() == tool.to_json() and "Bash: npm test" in repr(handle)
        with pytest.raises(BatonError) as forged:
            await handle.approve(bound_input_hash="forged")
        assert forged.value.code == "approval_binding_mismatch"
        with pytest.raises(BatonError) as mismatch:
            await handle.review_plan("approve")
        assert mismatch.value.code == "gate_kind_mismatch"
        with watch_gate(tool.id) as woken:  # a run waiting in this process is woken at once
            approved = await handle.approve(updated_input={"command": "npm test -- --ci"}, remember="session")
            assert woken.is_set()
        assert handle.status == "approved" and approved.decided_by == getpass.getuser()
        assert approved.decision is not None and approved.decision["remember_rule"] == "Bash(npm test:*)"
        assert (await handle.refresh()) == approved

        answered = await pending[1].answer({"DB": ["SQLite", "Postgres"]}, notes={"DB": "both"})
        assert answered.decision is not None
        assert answered.decision["answers"] == [{"header": "DB", "selected": ["SQLite", "Postgres"], "note": "both"}]
        with pytest.raises(BatonError) as edit:
            await pending[2].review_plan("edit")
        assert edit.value.code == "plan_edit_invalid"
        assert (await pending[2].review_plan("reject", reason="too broad")).status == "denied"
        with pytest.raises(BatonError) as not_resumable:
            await pending[4].continue_run()
        assert not_resumable.value.code == "gate_not_resumable"
        resumed = await pending[3].continue_run(budget_usd=1.5, max_seconds=600)
        assert resumed.decision is not None and resumed.decision["budget"] == {"usd": 1.5, "seconds": 600}
        denied = await (await baton.gate(other.id)).deny(reason="no", interrupt=True)
        assert denied.decision == {"decision": "deny", "reason": "no", "interrupt": True}
        assert await baton.gates(status="pending") == []
        with pytest.raises(BatonError) as missing:
            await baton.gate("gate_nope")
        assert missing.value.code == "gate_not_found"


def test_answers_from_selections() -> None:
    assert answers_from_selections({"A": "x", "B": ["y", "z"]}, {"B": "why", "C": "only a note"}) == [
        {"header": "A", "selected": ["x"]},
        {"header": "B", "selected": ["y", "z"], "note": "why"},
        {"header": "C", "selected": [], "note": "only a note"},
    ]
