"""baton.gates.kinds: which calls are questions or plan reviews, and what a decision tells the agent."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from baton.gates import Gatekeeper, Policy, ToolCall
from baton.gates.kinds import AgentAnswer, answer_for_agent, answers_by_question, gate_for_call, plan_text

QUESTIONS: list[dict[str, Any]] = [
    {
        "question": "Which database should I use?",
        "header": "Database",
        "multiSelect": False,
        "options": [{"label": "Postgres", "description": "a server"}, {"label": "SQLite", "description": "a file"}],
    },
    {
        "question": "Which extras?",
        "header": "Extras",
        "multiSelect": True,
        "options": [{"label": "Caching", "description": "c"}, {"label": "Metrics"}],
    },
]


@dataclass(frozen=True)
class Gate:
    kind: str
    status: str
    decision: dict[str, Any] | None
    questions: list[Any] | None = None
    plan: str | None = None


def ask(questions: Any = QUESTIONS) -> ToolCall:
    return ToolCall("AskUserQuestion", {"questions": questions}, "toolu_q")


def test_a_question_is_a_question_gate_with_the_questions_copied() -> None:
    shape = gate_for_call(ask())
    assert shape is not None and shape.kind == "question" and shape.plan is None
    assert shape.summary == "2 question(s): Database, Extras"
    assert shape.questions == [
        {**QUESTIONS[0], "allowFreeText": True},
        {
            **QUESTIONS[1],
            "options": [{"label": "Caching", "description": "c"}, {"label": "Metrics", "description": ""}],
            "allowFreeText": True,
        },
    ]
    assert shape.questions is not QUESTIONS  # a copy: the stored gate never aliases the call


def test_a_question_without_a_usable_shape_is_left_to_the_policy() -> None:
    assert gate_for_call(ask([])) is None
    assert gate_for_call(ask("which?")) is None
    assert gate_for_call(ask([{"question": "Q", "options": [{"description": "no label"}]}])) is None
    assert gate_for_call(ask([{"header": "H", "options": []}])) is None


def test_a_header_defaults_to_the_question_and_multiselect_to_false() -> None:
    shape = gate_for_call(ask([{"question": "Go on?", "options": [{"label": "Yes"}]}]))
    assert shape is not None and shape.questions == [
        {
            "question": "Go on?",
            "header": "Go on?",
            "options": [{"label": "Yes", "description": ""}],
            "multiSelect": False,
            "allowFreeText": True,
        }
    ]


def test_exit_plan_mode_is_a_plan_review_with_its_plan() -> None:
    shape = gate_for_call(ToolCall("ExitPlanMode", {"plan": "# Plan\n\n1. do A\n2. do B"}, "toolu_p", "switch_mode"))
    assert shape is not None and shape.kind == "plan_review"
    assert shape.plan == "# Plan\n\n1. do A\n2. do B" and shape.summary == "Plan"
    empty = gate_for_call(ToolCall("ExitPlanMode", {}, "toolu_p"))
    assert empty is not None and empty.plan == "" and empty.summary == "Review the plan"


def test_an_acp_mode_switch_after_a_plan_is_a_plan_review() -> None:
    call = ToolCall("other", {}, "call_1", "switch_mode")
    assert gate_for_call(call) is None  # no plan was sent: a plain tool call
    entries = [{"content": "read the code", "status": "completed"}, {"content": "fix add"}]
    shape = gate_for_call(call, last_plan=plan_text(entries))
    assert shape is not None and shape.kind == "plan_review"
    assert shape.plan == "- [completed] read the code\n- [pending] fix add"


def test_other_calls_are_tool_calls() -> None:
    assert gate_for_call(ToolCall("Bash", {"command": "ls"}, "t", "execute")) is None
    assert gate_for_call(ToolCall("Write", {"file_path": "a", "content": ""}, "t", "edit"), last_plan="x") is None


def test_an_answered_question_allows_the_call_with_answers_keyed_by_question_text() -> None:
    decision = {
        "decision": "answer",
        "answers": [
            {"header": "Database", "selected": ["SQLite"]},
            {"header": "Extras", "selected": ["Caching", "Metrics"], "note": "  keep it small "},
        ],
    }
    answer = answer_for_agent(Gate("question", "answered", decision, QUESTIONS), ask())
    assert answer.allow and not answer.interrupt and answer.mode is None
    assert answer.updated_input == {
        "questions": QUESTIONS,
        "answers": {"Which database should I use?": "SQLite", "Which extras?": "Caching, Metrics — keep it small"},
    }


def test_free_text_only_answers_with_the_note() -> None:
    assert answers_by_question(QUESTIONS, [{"header": "Database", "selected": [], "note": "DuckDB"}]) == {
        "Which database should I use?": "DuckDB"
    }
    # the question's text names it as well as its header; unknown headers are dropped
    assert answers_by_question(QUESTIONS, [{"header": "Which extras?", "selected": ["Metrics"]}, {"header": "x"}]) == {
        "Which extras?": "Metrics"
    }


def test_an_unanswered_question_is_a_denial_that_says_why() -> None:
    expired = Gate("question", "denied", {"reason": "timeout"}, QUESTIONS)
    answer = answer_for_agent(expired, ask())
    assert answer == AgentAnswer(False, None, "The user did not answer the questions (timeout).", reason="timeout")
    cancelled = Gate("question", "denied", {"decision": "deny", "reason": "cancelled", "interrupt": True}, QUESTIONS)
    assert answer_for_agent(cancelled, ask()).interrupt is True


def test_plan_approve_edit_reject() -> None:
    call = ToolCall("ExitPlanMode", {"plan": "1. A"}, "toolu_p")
    approved = answer_for_agent(Gate("plan_review", "approved", {"decision": "approve"}, plan="1. A"), call)
    assert approved.allow and approved.updated_input == {"plan": "1. A"} and approved.mode == "default"
    to_accept = Gate("plan_review", "approved", {"decision": "approve", "mode": "acceptEdits"}, plan="1. A")
    assert answer_for_agent(to_accept, call).mode == "acceptEdits"
    edited = answer_for_agent(
        Gate("plan_review", "approved", {"decision": "edit", "edited_plan": "1. C only"}, plan="1. A"), call
    )
    assert edited.allow and edited.updated_input == {"plan": "1. C only"} and edited.mode == "default"
    rejected = answer_for_agent(
        Gate("plan_review", "denied", {"decision": "reject", "reason": "too risky"}, plan="1. A"), call
    )
    assert not rejected.allow and rejected.mode is None and not rejected.interrupt
    assert rejected.message == "The user rejected the plan: too risky. Keep planning; do not start the work."
    plain = answer_for_agent(Gate("plan_review", "denied", {"decision": "reject", "reason": "human"}), call)
    assert plain.message == "The user rejected the plan. Keep planning; do not start the work."


def test_a_tool_gate_answer_carries_the_updated_input() -> None:
    call = ToolCall("Bash", {"command": "rm -rf build"}, "t")
    approved = Gate("tool", "approved", {"decision": "approve", "updated_input": {"command": "rm -rf build/tmp"}})
    assert answer_for_agent(approved, call).updated_input == {"command": "rm -rf build/tmp"}
    denied = answer_for_agent(Gate("tool", "denied", {"decision": "deny", "reason": "no", "interrupt": True}), call)
    assert (denied.allow, denied.interrupt, denied.message) == (False, True, "Denied by the user: no.")


def test_an_undecided_gate_never_allows() -> None:
    for status in ("pending", "superseded"):
        answer = answer_for_agent(Gate("question", status, None, QUESTIONS), ask())
        assert not answer.allow and answer.reason == "not_decided"


def test_planning_may_write_only_the_plan_file(tmp_path: Path) -> None:
    workspace, plans = tmp_path / "repo", tmp_path / "home" / ".claude" / "plans"
    workspace.mkdir()
    plans.mkdir(parents=True)
    (plans / "escape.md").symlink_to(workspace / "calc.js")
    keeper = Gatekeeper(Policy.build("plan"), workspace, plan_dir=plans)
    plan = keeper.decide(ToolCall("Write", {"file_path": str(plans / "go-fix-add.md"), "content": "# Plan"}))
    assert (plan.behavior, plan.reason) == ("allow", "plan_file")
    for path in (plans / "notes.txt", plans / "sub" / "x.md", plans / "escape.md", workspace / "calc.js"):
        decision = keeper.decide(ToolCall("Write", {"file_path": str(path), "content": ""}))
        assert decision.behavior != "allow", path
    assert keeper.decide(ToolCall("Bash", {"command": f"cat > {plans}/x.md"})).reason == "mode:plan"
    denied = Gatekeeper(Policy.build("plan", deny=("Write",)), workspace, plan_dir=plans)
    assert denied.decide(ToolCall("Write", {"file_path": str(plans / "a.md"), "content": ""})).behavior == "deny"
    # outside plan mode the plan directory is outside the workspace like any other
    keeper.set_mode("default")
    assert keeper.decide(ToolCall("Write", {"file_path": str(plans / "a.md"), "content": ""})).behavior == "ask"
    assert (
        Gatekeeper(Policy.build("plan"), workspace)
        .decide(ToolCall("Write", {"file_path": str(plans / "a.md"), "content": ""}))
        .reason
        == "mode:plan"
    )


def test_the_stored_questions_are_what_decide_validates_answers_against() -> None:
    from baton.errors import GateError
    from baton.gates.decisions import check_answers

    shape = gate_for_call(ask())
    assert shape is not None and shape.questions is not None
    answers = [{"header": "Database", "selected": ["SQLite"]}, {"header": "Extras", "selected": ["Caching", "Metrics"]}]
    assert check_answers(shape.questions, answers) == answers
    # Claude offers "Other": the user's own text is an answer
    own = [{"header": "Database", "selected": ["DuckDB"]}, {"header": "Extras", "selected": ["Caching"]}]
    assert check_answers(shape.questions, own) == own
    for wrong in (
        [{"header": "Nope", "selected": ["x"]}, *answers[1:]],
        [{"header": "Database", "selected": ["SQLite", "Postgres"]}, answers[1]],
        answers[:1],
    ):
        with pytest.raises(GateError) as caught:
            check_answers(shape.questions, wrong)
        assert caught.value.code == "answer_invalid"
