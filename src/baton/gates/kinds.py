"""Which calls are questions or plan reviews, and what a decided gate tells the agent.

The host consults :func:`gate_for_call` for every tool call **before** the policy: Claude's
``AskUserQuestion`` is a ``question`` gate and ``ExitPlanMode`` a ``plan_review`` gate, whatever
the mode or the rules say (both exist to reach a human). An ACP agent's mode-switch request
(kind ``switch_mode``) that follows a plan it sent is a ``plan_review`` too. Every other call
is a ``tool`` call, decided by the policy.

Once a gate is decided, :func:`answer_for_agent` turns the recorded decision into an
:class:`AgentAnswer`: allow or deny, the input the agent's tool runs with, the message the
model reads, whether the turn ends, and the permission mode the run moves to. How Claude Code
takes each answer (measured on Claude Code 2.1.332, see docs/gates.md):

- ``AskUserQuestion`` is answered by **allowing** the call with ``updatedInput`` = the input plus
  ``answers``: ``{question text: "label"}`` (a multi-select's labels joined by ``", "``). The
  tool result the model reads is ``Your questions have been answered: "Q"="A", …``. Keys must
  be the question's text (a header as key reads as "The user did not answer the questions"),
  and an allow without ``answers`` falls through to ``can_use_tool``.
- ``ExitPlanMode`` exists only while Claude itself is in ``plan`` mode (otherwise it fails
  before any hook: "You are not in plan mode"). Its input reaches the hook as ``{plan,
  planFilePath}``, the plan read from the plan file the model wrote. Approve: allow with the
  input unchanged (a bare allow falls through to ``can_use_tool``); Claude leaves ``plan`` for
  the mode it had before and the model reads "User has approved your plan … ## Approved Plan:".
  Edit: the hook's ``updatedInput.plan`` is ignored (Claude re-reads the file), so the adapter
  leaves the call undecided and answers ``can_use_tool`` with the edited input; the model reads
  "## Approved Plan (edited by user):" and the edit is saved to the plan file. Reject: deny
  with the reason; the model stays in plan mode and reads the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from baton.gates.gatekeeper import ToolCall

__all__ = [
    "PLAN_TOOL",
    "QUESTION_TOOL",
    "AgentAnswer",
    "DecidedGate",
    "GateKindName",
    "GateShape",
    "answer_for_agent",
    "answers_by_question",
    "gate_for_call",
    "plan_text",
]

GateKindName = Literal["tool", "question", "plan_review", "resource_limit"]

QUESTION_TOOL = "AskUserQuestion"
PLAN_TOOL = "ExitPlanMode"
# A plan decision moves the run out of ``plan`` to this mode unless the decision names one.
MODE_AFTER_PLAN = "default"
_SUMMARY_LIMIT = 200


@dataclass(frozen=True)
class GateShape:
    """What the host opens for a call that is not a plain tool call."""

    kind: GateKindName
    summary: str
    questions: list[dict[str, Any]] | None = None
    plan: str | None = None


@dataclass(frozen=True)
class AgentAnswer:
    """A decided gate as the agent gets it.

    ``updated_input`` replaces the call's input when allowed (Claude: the hook's
    ``updatedInput``); ``message`` is what the model reads on a denial; ``interrupt`` ends the
    turn; ``mode`` is the permission mode the run switches to before the agent goes on
    (``None``: unchanged).
    """

    allow: bool
    updated_input: dict[str, Any] | None
    message: str
    interrupt: bool = False
    mode: str | None = None
    reason: str = ""


class DecidedGate(Protocol):
    """The fields of a gate record (``baton.gates.ledger.GateRecord``) an answer is made from."""

    @property
    def kind(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def decision(self) -> dict[str, Any] | None: ...
    @property
    def questions(self) -> list[Any] | None: ...
    @property
    def plan(self) -> str | None: ...


def gate_for_call(call: ToolCall, *, last_plan: str | None = None) -> GateShape | None:
    """The gate a call opens when it is a question or a plan review, else ``None`` (a tool call).

    ``last_plan`` is the text of the latest ACP ``plan`` update of the turn (other agents): a
    ``switch_mode`` request after it is that plan's review. Claude's ``ExitPlanMode`` carries its
    plan in the input (``plan``).
    """
    data = call.input if isinstance(call.input, dict) else {}
    if call.tool_name == QUESTION_TOOL:
        questions = _questions(data.get("questions"))
        if questions is None:
            return None  # not a question Claude Code would show: the policy decides (unknown shape)
        headers = ", ".join(str(q.get("header") or q.get("question") or "") for q in questions)
        return GateShape("question", _clip(f"{len(questions)} question(s): {headers}"), questions=questions)
    if call.tool_name == PLAN_TOOL:
        plan = data.get("plan")
        text = plan if isinstance(plan, str) else ""
        return GateShape("plan_review", _clip(_first_line(text) or "Review the plan"), plan=text)
    if call.kind == "switch_mode" and last_plan:
        return GateShape("plan_review", _clip(_first_line(last_plan) or "Review the plan"), plan=last_plan)
    return None


def answer_for_agent(gate: DecidedGate, call: ToolCall) -> AgentAnswer:
    """What the agent gets for a decided gate (``question``, ``plan_review`` or ``tool``).

    A gate that is not decided (pending, superseded) never allows: that is a caller's bug, and
    the answer is a denial rather than an exception that could leave the agent waiting.
    """
    decision = gate.decision if isinstance(gate.decision, dict) else {}
    reason = str(decision.get("reason") or "")
    interrupt = decision.get("interrupt") is True
    data = dict(call.input) if isinstance(call.input, dict) else {}
    if gate.status in ("denied", "expired") or decision.get("decision") in ("deny", "reject"):
        return _denial(gate, reason or str(gate.status), interrupt)
    if gate.status not in ("approved", "answered"):
        return AgentAnswer(False, None, f"baton: the gate is {gate.status}, not decided", reason="not_decided")
    if gate.kind == "question":
        answers = answers_by_question(gate.questions or [], decision.get("answers") or [])
        return AgentAnswer(True, {**data, "answers": answers}, "answered by the user", reason="human")
    if gate.kind == "plan_review":
        mode = str(decision.get("mode") or MODE_AFTER_PLAN)
        if decision.get("decision") == "edit":
            edited = str(decision.get("edited_plan") or "")
            return AgentAnswer(True, {**data, "plan": edited}, "the plan was edited", mode=mode, reason="human")
        # Claude Code runs ExitPlanMode only with an input from the hook (a bare allow reaches
        # can_use_tool): the approval hands the input back unchanged.
        return AgentAnswer(True, data, "the plan was approved", mode=mode, reason="human")
    updated = decision.get("updated_input")
    return AgentAnswer(
        True, dict(updated) if isinstance(updated, dict) else None, "approved by the user", reason="human"
    )


def answers_by_question(questions: Sequence[Any], answers: Sequence[Any]) -> dict[str, str]:
    """baton's ``[{header, selected, note?}]`` as Claude's ``{question text: "A, B"}``.

    Each answer names its question by ``header`` (the question's text is accepted too). The
    selected labels (or the user's own text: Claude's questions allow free text) are joined by
    ``", "`` (Claude's multi-select form); a ``note`` follows them, or is the answer when nothing
    is selected. Answers that name no question are left out (``decide`` refuses them first).
    """
    by_header: dict[str, str] = {}
    for question in questions:
        if isinstance(question, Mapping) and isinstance(question.get("question"), str):
            text = question["question"]
            by_header[str(question.get("header") or text)] = text
            by_header.setdefault(text, text)
    result: dict[str, str] = {}
    for answer in answers:
        if not isinstance(answer, Mapping):
            continue
        text = by_header.get(str(answer.get("header")))
        if text is None:
            continue
        selected = answer.get("selected") or []
        labels = [str(label) for label in selected] if isinstance(selected, list) else [str(selected)]
        note = answer.get("note")
        parts = [", ".join(labels)] if labels else []
        if isinstance(note, str) and note.strip():
            parts.append(note.strip())
        result[text] = " — ".join(parts)
    return result


def plan_text(entries: Sequence[Any]) -> str:
    """An ACP ``plan`` update's entries as the text a human reviews (one ``- [status] item`` a line)."""
    lines = []
    for entry in entries:
        if isinstance(entry, Mapping):
            status = str(entry.get("status") or "pending")
            lines.append(f"- [{status}] {entry.get('content', '')}")
    return "\n".join(lines)


def _denial(gate: DecidedGate, reason: str, interrupt: bool) -> AgentAnswer:
    said = "" if reason in ("", "human") else reason  # "human": the ledger's reason when none was given
    if gate.kind == "question":
        message = f"The user did not answer the questions ({said})." if said else "The user did not answer."
    elif gate.kind == "plan_review":
        if reason in ("timeout", "cancelled"):
            message = f"The plan was not approved ({reason}). Do not start the work."
        else:
            why = f": {said}" if said else ""
            message = f"The user rejected the plan{why}. Keep planning; do not start the work."
    else:
        message = f"Denied by the user: {said}." if said else "Denied by the user."
    return AgentAnswer(False, None, message, interrupt=interrupt, reason=reason or "human")


def _questions(raw: Any) -> list[dict[str, Any]] | None:
    """Claude's questions, copied (``question``, ``header``, ``options`` [{label, description}],
    ``multiSelect``) with ``allowFreeText: true`` (what ``decide`` validates answers against);
    ``None`` when there is no list of questions with text and options."""
    if not isinstance(raw, list) or not raw:
        return None
    copied: list[dict[str, Any]] = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("question"), str):
            return None
        options = item.get("options")
        if not isinstance(options, list) or not all(
            isinstance(option, dict) and isinstance(option.get("label"), str) for option in options
        ):
            return None
        copied.append(
            {
                "question": item["question"],
                "header": str(item.get("header") or item["question"]),
                "options": [
                    {"label": option["label"], "description": str(option.get("description") or "")}
                    for option in options
                ],
                "multiSelect": item.get("multiSelect") is True,
                # Claude Code always offers "Other" (the user's own text): what is selected may
                # be any text, which Claude receives as the answer.
                "allowFreeText": True,
            }
        )
    return copied


def _first_line(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip().lstrip("#").strip()
        if stripped:
            return stripped
    return ""


def _clip(text: str) -> str:
    return text if len(text) <= _SUMMARY_LIMIT else text[: _SUMMARY_LIMIT - 1] + "…"
