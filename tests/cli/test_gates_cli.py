"""``baton gates``, ``approve``, ``deny``, ``answer``, ``review-plan``, ``continue`` through the console
script, on gates opened through the ledger (the run side opens them in real runs: tests/runs)."""

from __future__ import annotations

import asyncio
import functools
import getpass
import json
from pathlib import Path
from typing import Any

import pytest
from tests.cli._baton_cli import BatonCLI, Invocation, invoke_in_process

from baton.config import Settings
from baton.gates.ledger import GateLedger, GateRecord
from baton.store import Store

QUESTION = {
    "question": "Which database?",
    "header": "Database",
    "options": [{"label": "SQLite"}, {"label": "Postgres"}],
    "multiSelect": False,
}


class Gates:
    """Opens and reads gates in the CLI's BATON_HOME, as the process executing a run would."""

    def __init__(self, home: Path) -> None:
        self.url = Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": str(home)}).resolved_database_url
        home.mkdir(parents=True, exist_ok=True)

    def run(self, agent: str = "claude") -> str:
        async def create() -> str:
            async with Store.open(self.url) as store:
                return (await store.create_run(agent=agent, owner="alice")).id

        return asyncio.run(create())

    def open(self, run_id: str, kind: str, **fields: Any) -> GateRecord:
        async def opened() -> GateRecord:
            async with Store.open(self.url) as store:
                gate, _ = await GateLedger(store).open(run_id, kind, **fields)  # type: ignore[arg-type]
                return gate

        return asyncio.run(opened())

    def tool(self, run_id: str, command: str) -> GateRecord:
        return self.open(
            run_id, "tool", summary=f"Bash: {command}", tool_name="Bash", tool_call_id=f"toolu_{command}",
            bound_call_id=f"toolu_{command}", bound_input_hash=f"h-{command}", input={"command": command},
        )  # fmt: skip

    def get(self, gate_id: str) -> GateRecord:
        async def read() -> GateRecord:
            async with Store.open(self.url) as store:
                return await GateLedger(store).get(gate_id)

        return asyncio.run(read())

    def inbox(self, run_id: str) -> list[dict[str, Any]]:
        async def read() -> list[dict[str, Any]]:
            async with Store.open(self.url) as store:
                return await store.inbox_pending(run_id)

        return asyncio.run(read())


@pytest.fixture
def gates(baton: BatonCLI) -> Gates:
    return Gates(baton.home)


def refused(invocation: Invocation, code: str, *, as_json: bool = False) -> str:
    assert invocation.returncode == 3, invocation.describe()
    assert invocation.stdout == ""
    if as_json:
        error = json.loads(invocation.stderr)["error"]
        assert error["code"] == code, invocation.describe()
        return str(error["message"])
    assert invocation.stderr.startswith(f"baton: {code}: "), invocation.describe()
    return invocation.stderr


def test_list_and_decide_tool_gates(baton: BatonCLI, gates: Gates, tmp_path: Path) -> None:
    run_id = gates.run()
    plain = gates.tool(run_id, "npm test")
    remembered = gates.tool(run_id, "npm test -- --ci")  # another input: supersedes the first
    assert gates.get(plain.id).status == "superseded"
    other = gates.run()
    edited, denied, forged = (gates.tool(other, "npm test -- --ci") for _ in range(3))  # one input: all pending
    edit_file = tmp_path / "edit.json"
    edit_file.write_text(json.dumps({"command": "npm test -- --bail"}))
    listed, approved, edit, deny, forge, forge_json, unknown = baton.many(
        ("gates", "--json"),
        ("approve", remembered.id, "--remember", "session", "--reason", "fine"),
        ("approve", edited.id, "--updated-input", f"@{edit_file}", "--json"),
        ("deny", denied.id, "--reason", "not that", "--interrupt", "--json"),
        ("approve", forged.id, "--bound-input-hash", "0" * 64),
        ("approve", forged.id, "--bound-call-id", "toolu_other", "--json"),
        ("approve", "gate_nope"),
    )
    assert listed.returncode == 0, listed.describe()
    assert {g["id"]: g["status"] for g in json.loads(listed.stdout)}[plain.id] == "superseded"
    assert [g["id"] for g in json.loads(listed.stdout)][-3:] == [edited.id, denied.id, forged.id]
    assert approved.returncode == 0, approved.describe()
    assert approved.stdout == (
        f"approved {remembered.id} (tool: Bash: npm test -- --ci)\nremembered for this run: Bash(npm test:*)\n"
    )
    recorded = gates.get(remembered.id)
    assert recorded.decided_by == getpass.getuser()
    assert recorded.decision == {
        "decision": "approve", "bound_call_id": remembered.bound_call_id,
        "bound_input_hash": remembered.bound_input_hash, "reason": "fine", "remember": "session",
        "remember_rule": "Bash(npm test:*)",
    }  # fmt: skip
    assert [m["payload"] for m in gates.inbox(run_id) if m["kind"] == "gate_decision"] == [{"gate_id": remembered.id}]

    assert edit.returncode == 0, edit.describe()
    assert json.loads(edit.stdout)["decision"]["updated_input"] == {"command": "npm test -- --bail"}
    body = json.loads(deny.stdout)
    assert body["status"] == "denied" and body["decision"] == {
        "decision": "deny",
        "reason": "not that",
        "interrupt": True,
    }

    refused(forge, "approval_binding_mismatch")
    assert "bound_call_id" in refused(forge_json, "approval_binding_mismatch", as_json=True)
    assert gates.get(forged.id).status == "pending"
    assert unknown.returncode == 1 and unknown.stderr == "baton: gate_not_found: no gate gate_nope\n"

    # The same decision again is a safe retry; another one is refused with what was recorded.
    again, other_decision, pending = baton.many(
        ("deny", denied.id, "--reason", "not that", "--interrupt"),
        ("approve", denied.id, "--json"),
        ("gates", "--run", other, "--status", "pending"),
    )
    header, *rows = pending.stdout.splitlines()
    assert pending.returncode == 0 and header.split() == ["ID", "RUN", "KIND", "STATUS", "SUMMARY"]
    assert [row.split()[:4] for row in rows] == [[forged.id, other, "tool", "pending"]]
    assert again.returncode == 0 and again.stdout.startswith(f"denied {denied.id}"), again.describe()
    refused(other_decision, "gate_not_pending", as_json=True)
    assert json.loads(other_decision.stderr)["error"]["details"]["decision"]["reason"] == "not that"


def test_answer_review_plan_continue_and_kind_refusals(baton: BatonCLI, gates: Gates, tmp_path: Path) -> None:
    runs = [gates.run() for _ in range(4)]
    question = gates.open(
        runs[0], "question", summary="Which database?", tool_name="AskUserQuestion", bound_call_id="toolu_q",
        bound_input_hash="hq", questions=[QUESTION],
    )  # fmt: skip
    plan = gates.open(runs[1], "plan_review", summary="a plan", tool_name="ExitPlanMode", plan="1. read\n2. write")
    limit = gates.open(runs[2], "resource_limit", summary="budget reached: $1.00")
    tool = gates.tool(runs[3], "ls")
    plan_file = tmp_path / "plan.md"
    plan_file.write_text("1. read\n2. test\n3. write\n")
    results = baton.many(
        ("answer", question.id, "--select", "Database=MySQL"),
        ("answer", question.id, "--select", "Colour=red", "--json"),
        ("review-plan", plan.id, "edit"),
        ("review-plan", tool.id, "approve"),
        ("continue", tool.id),
        ("continue", limit.id, "--budget-usd", "-1"),
        ("answer", tool.id, "--select", "Database=SQLite"),
    )
    not_offered, unknown_header, no_plan, plan_on_tool, continue_tool, negative, answer_tool = results
    assert "MySQL" in refused(not_offered, "answer_invalid")
    assert "Colour" in refused(unknown_header, "answer_invalid", as_json=True)
    refused(no_plan, "plan_edit_invalid")
    refused(plan_on_tool, "gate_kind_mismatch")
    refused(continue_tool, "gate_not_resumable")
    assert negative.returncode == 2 and "budget.usd" in negative.stderr, negative.describe()
    refused(answer_tool, "gate_kind_mismatch")
    assert all(gates.get(g.id).status == "pending" for g in (question, plan, limit, tool))

    answered, edited, resumed = baton.many(
        ("answer", runs[0], "--select", "Database=Postgres", "--note", "Database=the shared one", "--json"),
        ("review-plan", plan.id, "edit", "--plan", f"@{plan_file}", "--reason", "test first", "--json"),
        ("continue", limit.id, "--budget-usd", "2.5", "--max-turns", "30", "--json"),
    )
    assert [r.returncode for r in (answered, edited, resumed)] == [0, 0, 0], [answered.describe(), edited.describe()]
    assert json.loads(answered.stdout)["decision"]["answers"] == [
        {"header": "Database", "selected": ["Postgres"], "note": "the shared one"}
    ]
    assert json.loads(edited.stdout)["decision"] == {
        "decision": "edit", "reason": "test first", "edited_plan": "1. read\n2. test\n3. write\n"
    }  # fmt: skip
    assert json.loads(resumed.stdout)["decision"]["budget"] == {"usd": 2.5, "turns": 30}


def test_run_level_shortcut_and_two_processes_at_once(baton: BatonCLI, gates: Gates) -> None:
    run_id = gates.run()
    first = gates.tool(run_id, "make")
    gates.open(run_id, "plan_review", summary="plan", plan="p")
    ambiguous = baton("deny", run_id, "--json")  # first, alone: two gates of some kind are pending
    refused(ambiguous, "gate_ambiguous", as_json=True)
    assert "gate_ids" in json.loads(ambiguous.stderr)["error"]["details"]
    by_kind, none_left = baton.many(("approve", run_id, "--json"), ("continue", run_id))
    assert by_kind.returncode == 0 and json.loads(by_kind.stdout)["id"] == first.id, by_kind.describe()
    assert none_left.returncode == 1 and "gate_not_found" in none_left.stderr

    contested = gates.tool(gates.run(), "deploy")
    outcomes = baton.many(("approve", contested.id, "--json"), ("deny", contested.id, "--json"))
    assert sorted(o.returncode for o in outcomes) == [0, 3], [o.describe() for o in outcomes]
    winner = next(o for o in outcomes if o.returncode == 0)
    loser = next(o for o in outcomes if o.returncode == 3)
    assert json.loads(loser.stderr)["error"]["code"] == "gate_not_pending"
    assert gates.get(contested.id).decision == json.loads(winner.stdout)["decision"]


def test_an_edit_for_an_agent_that_cannot_apply_it_is_refused(baton: BatonCLI, gates: Gates) -> None:
    run_id = gates.run(agent="codex")
    gate = gates.tool(run_id, "rm -rf one")
    edit = json.dumps({"command": "echo hi"})
    plain, as_json = baton.many(
        ("approve", gate.id, "--updated-input", edit), ("approve", gate.id, "--updated-input", edit, "--json")
    )
    message = refused(plain, "edit_not_supported")
    assert "codex cannot run an edited call" in message and "approve it unedited or deny it" in message
    details = json.loads(as_json.stderr)["error"]["details"]
    assert details == {"gate_id": gate.id, "agent": "codex", "field": "updated_input"}
    refused(as_json, "edit_not_supported", as_json=True)
    assert gates.get(gate.id).status == "pending" and gates.inbox(run_id) == []  # the run was not woken
    unchanged = baton("approve", gate.id, "--updated-input", json.dumps({"command": "rm -rf one"}), "--json")
    assert unchanged.returncode == 0, unchanged.describe()
    assert "updated_input" not in json.loads(unchanged.stdout)["decision"]
    assert [m["payload"] for m in gates.inbox(run_id) if m["kind"] == "gate_decision"] == [{"gate_id": gate.id}]


def test_gates_usage_errors(baton: BatonCLI, gates: Gates, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = gates.tool(gates.run(), "ls -la")
    invoke = functools.partial(invoke_in_process, monkeypatch, baton.home)  # refused before anything: in-process
    listed = invoke("gates")
    assert listed.returncode == 0 and gate.id in listed.stdout
    for args in (
        ("gates", "--status", "waiting"),
        ("approve", gate.id, "--updated-input", "{not json"),
        ("approve", gate.id, "--updated-input", "[1]"),
        ("approve", gate.id, "--remember", "forever"),
        ("answer", gate.id, "--select", "no-equals-sign"),
        ("answer", gate.id, "--answers", "[]", "--select", "a=b"),
        ("review-plan", gate.id, "maybe"),
    ):
        invocation = invoke(*args)
        assert invocation.returncode == 2, invocation.describe()
        assert invocation.stderr.startswith("baton: invalid_argument: "), invocation.describe()
    assert gates.get(gate.id).status == "pending"
    # A gate past its deadline is listed as expired: a denial with reason timeout, never pending.
    overdue = gates.open(gates.run(), "plan_review", summary="plan", plan="p", expires_in_seconds=0.001)
    listed = invoke("gates", "--status", "expired", "--json")
    assert [(g["id"], g["decision"]["reason"]) for g in json.loads(listed.stdout)] == [(overdue.id, "timeout")]


def test_gates_of_a_run_that_does_not_exist_is_run_not_found(baton: BatonCLI, gates: Gates) -> None:
    empty = gates.run()
    nope, nope_json, none = baton.many(
        ("gates", "--run", "run_nope"), ("gates", "--run", "run_nope", "--json"), ("gates", "--run", empty)
    )
    assert nope.returncode == 1 and nope.stdout == "", nope.describe()
    assert nope.stderr == "baton: run_not_found: no run run_nope\n"
    assert nope_json.returncode == 1 and json.loads(nope_json.stderr)["error"]["code"] == "run_not_found"
    assert none.returncode == 0 and none.stdout == "no gates\n", none.describe()  # a run with no gates is fine
