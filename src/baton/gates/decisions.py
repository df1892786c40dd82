"""Decision bodies: which kind of gate each one resolves, and whether it is valid for that gate.

The bodies are the HTTP bodies of docs/design.md "HTTP basics" (the CLI and the Python API build
the same ones):

    tool            {decision: approve|deny, bound_call_id, bound_input_hash,
                     updated_input?, remember?: "session", reason?, interrupt?}
    question        {decision: answer, answers: [{header, selected: [..], note?}],
                     bound_call_id, bound_input_hash}
    plan_review     {decision: approve|edit|reject, edited_plan?, reason?}
    resource_limit  {decision: continue, budget?: {usd?, turns?, seconds?}}

``deny`` (with ``reason`` and ``interrupt``) is accepted by every kind: it is what cancelling a
paused run does to each pending gate. A denial may leave the binding out (or send it as null);
a binding it does send must be the gate's. :func:`check_decision` returns the decision as it is
recorded (``reason`` filled in, the binding kept; an ``updated_input`` equal to the gate's input
is no edit and is left out); nothing here touches the database.

An edit (``updated_input``, ``edited_plan``) is honoured only by an agent that runs the edited
input: for any other, :func:`refuse_edit` refuses it with ``edit_not_supported`` before anything
is recorded (the agent would run what it proposed while baton reported the edit as what ran).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, get_args

from baton.errors import GateError, UsageError
from baton.gates.remember import suggested_rule
from baton.store.records import GateKind

if TYPE_CHECKING:
    from baton.gates.ledger import GateRecord

__all__ = [
    "AGENTS_APPLYING_EDITS",
    "COMPARED_FIELDS",
    "EDIT_FIELDS",
    "GateKind",
    "body_kind",
    "check_decision",
    "refuse_edit",
    "same_decision",
]

GATE_KINDS: Final[frozenset[str]] = frozenset(get_args(GateKind))

_BINDING: Final = ("bound_call_id", "bound_input_hash")
_FIELDS: Final[dict[str, frozenset[str]]] = {
    "tool": frozenset({"decision", *_BINDING, "updated_input", "remember", "reason", "interrupt"}),
    "question": frozenset({"decision", "answers", *_BINDING}),
    "plan_review": frozenset({"decision", "edited_plan", "reason"}),
    "resource_limit": frozenset({"decision", "budget"}),
}
_DENY_FIELDS: Final = frozenset({"decision", *_BINDING, "reason", "interrupt"})
_WORDS: Final[dict[str, frozenset[str]]] = {
    "tool": frozenset({"approve", "deny"}),
    "question": frozenset({"answer"}),
    "plan_review": frozenset({"approve", "edit", "reject"}),
    "resource_limit": frozenset({"continue"}),
}
COMPARED_FIELDS: Final = (
    "decision",
    "updated_input",
    "remember",
    "reason",
    "interrupt",
    "answers",
    "edited_plan",
    "budget",
)
"""What makes two decisions the same one (a retry); the binding was checked before."""
EDIT_FIELDS: Final = ("updated_input", "edited_plan")
# The agents (by their stored name) that run an approval's edited input: the registry's
# ``applies_edits`` entries (tests/agents/test_registry_edits.py keeps the two equal). Named
# here so deciding a gate needs no agent code (the gates layer sits below the agents).
AGENTS_APPLYING_EDITS: Final = frozenset({"claude"})
"""The fields of a recorded decision that make the agent do something other than it proposed."""


def body_kind(body: Mapping[str, Any]) -> GateKind | None:
    """The kind of gate a body is written for, from its words; None when it fits several (deny)."""
    word = body.get("decision")
    if word == "answer":
        return "question"
    if word == "continue":
        return "resource_limit"
    if word in ("edit", "reject") or "edited_plan" in body:
        return "plan_review"
    if word == "approve":
        tool_fields = {"updated_input", "remember", *_BINDING}
        return "tool" if tool_fields & set(body) else None
    return None


def check_decision(gate: GateRecord, body: Mapping[str, Any], kind: GateKind | None = None) -> dict[str, Any]:
    """The decision to record for ``gate``, or the refusal (nothing is changed either way).

    ``kind`` is the kind the caller addressed (the HTTP endpoint, the API method); without it
    the body's words say.
    """
    if not isinstance(body, Mapping):
        raise UsageError("invalid_argument", "a decision is a JSON object")
    word = body.get("decision")
    addressed = kind or body_kind(body)
    if word == "deny" and kind in (None, "tool"):
        addressed = None
    if addressed is not None:
        _check_kind(gate, addressed)
    allowed = _DENY_FIELDS if word == "deny" else _FIELDS[gate.kind]
    if word not in _WORDS[gate.kind] | {"deny"}:
        raise UsageError(
            "invalid_argument",
            f"decision: a {gate.kind} gate takes {sorted(_WORDS[gate.kind] | {'deny'})}, not {word!r}",
            details={"field": "decision"},
        )
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise UsageError(
            "invalid_argument",
            f"{unknown[0]}: not a field of a {word} decision on a {gate.kind} gate",
            details={"field": unknown[0]},
        )
    if word == "deny":  # a denial may leave the binding out: a null binding is left out
        body = {name: value for name, value in body.items() if name not in _BINDING or value is not None}
    _check_binding(gate, body, required=word != "deny" and gate.kind in ("tool", "question"))
    decision: dict[str, Any] = {"decision": word}
    for name in _BINDING:
        if gate.kind in ("tool", "question") and name in body:
            decision[name] = body[name]
    if word == "deny":
        decision["reason"] = _text(body, "reason") or "human"
        decision["interrupt"] = _flag(body, "interrupt")
    elif gate.kind == "tool":
        decision.update(_tool_approval(gate, body))
    elif gate.kind == "question":
        decision["answers"] = check_answers(gate.questions or [], body.get("answers"))
        decision["reason"] = "human"
    elif gate.kind == "plan_review":
        decision.update(_plan_review(str(word), body))
    else:
        decision["budget"] = _budget(body.get("budget"))
        decision["reason"] = "human"
    return decision


def same_decision(recorded: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    if recorded is None:
        return False
    return all(recorded.get(name) == wanted.get(name) for name in COMPARED_FIELDS)


def refuse_edit(gate: GateRecord, decision: Mapping[str, Any], *, agent: str, applies_edits: bool) -> None:
    """``edit_not_supported`` for an edited decision when the run's ``agent`` cannot apply edits:
    the gate stays pending, to be approved as proposed or denied."""
    edited = [name for name in EDIT_FIELDS if name in decision]
    if not edited or applies_edits:
        return
    what = "an edited plan" if edited[0] == "edited_plan" else "an edited call"
    plan = gate.kind == "plan_review"
    instead = "approve or reject the plan as proposed" if plan else "approve it unedited or deny it"
    raise GateError(
        "edit_not_supported",
        f"{agent} cannot run {what}: it would run what it proposed; {gate.id} is still pending: {instead}",
        details={"gate_id": gate.id, "agent": agent, "field": edited[0]},
    )


def _check_kind(gate: GateRecord, addressed: GateKind) -> None:
    if addressed == gate.kind:
        return
    if addressed == "resource_limit":
        raise GateError(
            "gate_not_resumable",
            f"{gate.id} is a {gate.kind} gate; only a resource_limit gate can be continued",
            details={"gate_id": gate.id, "kind": gate.kind},
        )
    raise GateError(
        "gate_kind_mismatch",
        f"{gate.id} is a {gate.kind} gate, not a {addressed} gate",
        details={"gate_id": gate.id, "kind": gate.kind, "addressed": addressed},
    )


def _check_binding(gate: GateRecord, body: Mapping[str, Any], *, required: bool) -> None:
    for name in _BINDING:
        if name not in body:
            if required:
                raise UsageError(
                    "invalid_argument", f"{name}: required (echo the gate's own value)", details={"field": name}
                )
            continue
        if body[name] != getattr(gate, name):
            raise GateError(
                "approval_binding_mismatch",
                f"{name} does not match gate {gate.id}: the decision was made for another call or input",
                details={"gate_id": gate.id, "field": name},
            )


def _tool_approval(gate: GateRecord, body: Mapping[str, Any]) -> dict[str, Any]:
    decision: dict[str, Any] = {"reason": _text(body, "reason") or "human"}
    effective = gate.input or {}
    if "updated_input" in body:
        updated = body["updated_input"]
        if not isinstance(updated, dict):
            raise UsageError("invalid_argument", "updated_input: a JSON object", details={"field": "updated_input"})
        if updated != effective:  # the input as proposed is no edit
            decision["updated_input"] = updated
            effective = updated
    if "remember" in body:
        if body["remember"] != "session":
            raise UsageError("invalid_argument", 'remember: only "session"', details={"field": "remember"})
        rule = suggested_rule(gate.tool_name, effective)
        if rule is None:
            raise UsageError(
                "invalid_argument",
                f"remember: there is no rule narrower than the whole tool {gate.tool_name} to suggest for this call; "
                "approve it once",
                details={"field": "remember"},
            )
        decision["remember"] = "session"
        decision["remember_rule"] = rule
    return decision


def check_answers(questions: list[Any], answers: Any) -> list[dict[str, Any]]:
    """Answers in the order given, each for one question: ``answer_invalid`` names what is wrong."""
    if not isinstance(answers, list) or not answers:
        raise GateError("answer_invalid", "answers: a non-empty list of {header, selected, note?}")
    by_header = {q.get("header"): q for q in questions if isinstance(q, dict)}
    seen: set[str] = set()
    checked = []
    for answer in answers:
        if not isinstance(answer, dict) or set(answer) - {"header", "selected", "note"}:
            raise GateError("answer_invalid", "each answer is {header, selected: [..], note?}")
        header, selected, note = answer.get("header"), answer.get("selected"), answer.get("note")
        question = by_header.get(header)
        if not isinstance(header, str) or question is None:
            raise GateError(
                "answer_invalid",
                f"no question has the header {header!r} (the headers: {sorted(map(str, by_header))})",
                details={"header": header},
            )
        if header in seen:
            raise GateError("answer_invalid", f"{header!r} is answered twice", details={"header": header})
        seen.add(header)
        if not isinstance(selected, list) or not selected or not all(isinstance(s, str) for s in selected):
            raise GateError("answer_invalid", f"{header!r}: selected is a non-empty list of strings")
        if len(selected) > 1 and not question.get("multiSelect"):
            raise GateError("answer_invalid", f"{header!r} takes one option", details={"header": header})
        offered = [o.get("label") if isinstance(o, dict) else o for o in question.get("options") or []]
        if not _free_text(question):
            for choice in selected:
                if choice not in offered:
                    raise GateError(
                        "answer_invalid",
                        f"{header!r}: {choice!r} is not one of the options offered ({offered})",
                        details={"header": header, "selected": choice},
                    )
        if note is not None and not isinstance(note, str):
            raise GateError("answer_invalid", f"{header!r}: note is a string", details={"header": header})
        checked.append({"header": header, "selected": list(selected), **({"note": note} if note is not None else {})})
    missing = sorted(str(h) for h in by_header if h not in seen)
    if missing:
        raise GateError("answer_invalid", f"unanswered questions: {missing}", details={"missing": missing})
    return checked


def _free_text(question: Mapping[str, Any]) -> bool:
    return bool(question.get("allow_free_text") or question.get("allowFreeText"))


def _plan_review(word: str, body: Mapping[str, Any]) -> dict[str, Any]:
    decision: dict[str, Any] = {"reason": _text(body, "reason") or "human"}
    edited = body.get("edited_plan")
    if word == "edit":
        if not isinstance(edited, str) or not edited.strip():
            raise GateError("plan_edit_invalid", "edited_plan: the edited plan is required for edit")
        decision["edited_plan"] = edited
    elif "edited_plan" in body:
        raise GateError("plan_edit_invalid", f"edited_plan: only an edit carries a plan, not {word}")
    return decision


def _budget(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"usd", "turns", "seconds"}:
        raise UsageError("invalid_argument", "budget: {usd?, turns?, seconds?}", details={"field": "budget"})
    budget: dict[str, Any] = {}
    for name, number in value.items():
        integral = name == "turns"
        ok = isinstance(number, int) if integral else isinstance(number, (int, float))
        if not ok or isinstance(number, bool) or number <= 0:
            kind = "a positive integer" if integral else "a positive number"
            raise UsageError("invalid_argument", f"budget.{name}: {kind}", details={"field": f"budget.{name}"})
        budget[name] = number
    return budget


def _text(body: Mapping[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise UsageError("invalid_argument", f"{name}: a string", details={"field": name})
    return value


def _flag(body: Mapping[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise UsageError("invalid_argument", f"{name}: true or false", details={"field": name})
    return value
