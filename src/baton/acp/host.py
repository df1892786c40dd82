"""The host: baton's ACP *client* side of a run.

It answers the agent's permission requests through the Gatekeeper (choosing the option by
its ``kind`` and answering with that option's own id), serves ``fs/*`` confined to the
workspace, and advertises only what it implements (no terminals: docs/agents.md). Everything
the agent says is already in the log (the tapping transport), so ``session/update`` needs no
work here beyond keeping the session's state (:class:`~baton.acp.session_state.AgentSession`:
title, config options, commands, mode, usage) and the turn's latest ``usage_update`` (one sent
after its turn ended is not the next turn's). A permission request the agent withdraws with
``$/cancel_request`` stops waiting for its human or gate and is answered ``-32800``
(:mod:`baton.acp.cancel`).

:class:`AgentNormalizer` sits between an agent's transport and the tap: it adds
``_meta.baton.command`` (one string; Codex sends argv arrays) and ``_meta.baton.tool_name``
(baton's name for the agent's tool) to tool calls, so the runner-event projection stays
agent-agnostic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

from baton.acp.cancel import PendingRequest, current_request, request_cancelled, until_cancelled
from baton.acp.replay import is_after_turn
from baton.acp.session_state import AgentSession, usd_cost
from baton.acp.transport import Transport
from baton.acp.workspace import Workspace, workspace_error
from baton.agents.registry import AgentEntry, bound_input_hash, claude_bound_input
from baton.errors import WorkspaceError
from baton.events.commands import command_string
from baton.gates import Decision, Gatekeeper, ToolCall
from baton.gates.kinds import MODE_AFTER_PLAN, PLAN_TOOL, GateShape, gate_for_call, plan_text

__all__ = [
    "MCP_PROXY",
    "NO_HUMAN",
    "AgentNormalizer",
    "AskHuman",
    "BatonHost",
    "GateAnswer",
    "HumanGates",
    "annotate",
    "choose_option",
]

# A host with nobody to ask (no gates, no editor): a policy answer of "ask" is a denial that says why.
NO_HUMAN = "no_human"
# The reason of a permission answered "allow" because baton's MCP proxy decides the call (baton.mcp).
MCP_PROXY = "mcp_proxy"

# Someone who can answer a permission the policy says to *ask* about (``baton acp``: the editor's
# user): given the agent's options, its tool call and the policy's decision, True to allow.
# Asks a human (baton acp: the editor) to pick one of the options for the tool call: the id of
# the option chosen, or None when the request was dismissed or cancelled.
AskHuman = Callable[[list[PermissionOption], Any, Decision], Awaitable[str | None]]


@dataclass(frozen=True)
class GateAnswer:
    """What a human gate made of a call: ``park`` means the run parks before it is decided
    (Claude's hook answers ``defer``; another agent gets no answer and is stopped)."""

    behavior: Literal["allow", "deny", "park"]
    reason: str
    message: str
    updated_input: dict[str, Any] | None = None
    interrupt: bool = False
    decided_by: str | None = None
    gate_id: str | None = None


class HumanGates(Protocol):
    """Who opens a gate for a call the policy says to ask about (baton.runs.gating.RunGates)."""

    async def decide(
        self,
        calls: list[ToolCall],
        decision: Decision,
        shape: Any,
        *,
        bound_call_id: str,
        bound_input_hash: str,
        cancelled: asyncio.Event,
        withdrawn: asyncio.Event | None = None,
    ) -> GateAnswer: ...


_ALLOW_KINDS = ("allow_once", "allow_always")
# The updates that describe the session rather than the turn (baton.acp.session_state).
_SESSION_KINDS = frozenset(
    {"session_info_update", "config_option_update", "available_commands_update", "current_mode_update", "usage_update"}
)
_REJECT_KINDS = ("reject_once", "reject_always")
_RANK = {"deny": 2, "ask": 1, "allow": 0}


def choose_option(options: list[PermissionOption], allow: bool) -> str | None:
    """The id of the first option of the wanted kind (once before always), or None."""
    for kind in _ALLOW_KINDS if allow else _REJECT_KINDS:
        for option in options:
            if option.kind == kind:
                return option.option_id
    return None


class BatonHost:
    """The ACP client a run's agent talks to."""

    def __init__(
        self,
        gatekeeper: Gatekeeper,
        wait_logged: Callable[[], Awaitable[None]],
        *,
        agent: AgentEntry | None = None,
        workspace: Workspace | None = None,
        ask_human: AskHuman | None = None,
        gates: HumanGates | None = None,
        on_mode: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.gatekeeper = gatekeeper
        self.ask_human = ask_human
        self.on_mode = on_mode  # the run's mode switch, for a plan the human approved here
        self.gates = gates
        self.last_plan: str | None = None  # the latest ACP plan of the turn: a mode switch after it is its review
        self._wait_logged = wait_logged
        self.agent = agent
        self.workspace = workspace
        self.last_usage_update: dict[str, Any] | None = None  # this turn's latest
        self.session = AgentSession()  # the agent session's latest state, across turns
        # The run's MCP servers behind baton's proxy (baton.mcp), which decides their calls itself.
        self.mcp_servers: frozenset[str] = frozenset()
        self._cancelled = asyncio.Event()

    def cancel_pending(self) -> None:
        """The turn is being cancelled: permission requests in flight are answered ``cancelled``."""
        self._cancelled.set()

    def turn_started(self) -> None:
        self._cancelled = asyncio.Event()
        self.last_usage_update = None
        self.last_plan = None

    def turn_usage(self, response: Any) -> dict[str, Any]:
        """The turn's usage for ``_baton/turn_complete`` from an agent that sends no
        ``_baton/usage``: ``usage`` = the prompt response's token counts, with the context window
        of the turn's latest ``usage_update`` as ``context_used``/``context_size``; without
        token counts, that ``usage_update``'s ``used``/``size`` alone; ``total_cost_usd`` = the
        session's latest USD ``cost`` (cumulative; one reported after an earlier turn ended
        included)."""
        found: dict[str, Any] = {}
        tokens = getattr(response, "usage", None)
        usage: dict[str, Any] = tokens.model_dump(by_alias=True, exclude_none=True) if tokens is not None else {}
        update = self.last_usage_update
        if update is not None and tokens is not None:
            usage.update(context_used=update.get("used"), context_size=update.get("size"))
        elif update is not None:
            usage.update(used=update.get("used"), size=update.get("size"))
        if usage:
            found["usage"] = usage
        cost = usd_cost(update) if update is not None else self.session.cost_usd
        if cost is not None:
            found["total_cost_usd"] = cost
        return found

    async def request_permission(
        self, options: list[PermissionOption], session_id: str, tool_call: Any, **meta: Any
    ) -> RequestPermissionResponse:
        pending = current_request()  # the agent may withdraw it with $/cancel_request
        response = await self._request_permission(options, tool_call, meta, pending)
        if pending is not None and pending.cancelled.is_set():
            raise request_cancelled(pending.method)
        return response

    async def _request_permission(
        self, options: list[PermissionOption], tool_call: Any, meta: dict[str, Any], pending: PendingRequest | None
    ) -> RequestPermissionResponse:
        calls = self._calls(tool_call, meta)
        shape = _shape(calls[0], self.last_plan)
        decision = _combine([self.gatekeeper.decide(call) for call in calls])
        described = tool_call.model_dump(by_alias=True, exclude_none=True)
        proxied = self._proxied(calls, described)
        if proxied is not None:
            decision = Decision("allow", MCP_PROXY, f"{proxied} is decided by baton's MCP proxy")
        if shape is not None:  # a question or a plan review always reaches a human
            decision = Decision(behavior="ask", reason=f"gate:{shape.kind}", message=shape.summary)
        bound = self.agent.bound_input(described) if self.agent is not None else claude_bound_input(described)
        baton: dict[str, Any] = {
            "bound_call_id": tool_call.tool_call_id,
            "bound_input_hash": bound_input_hash(bound),
            "tool_name": proxied or calls[0].tool_name,
        }
        answer: GateAnswer | None = None
        if decision.behavior == "ask" and self.ask_human is not None:
            await self._wait_logged()  # the request is in the log before anyone is asked
            answer = await until_cancelled(
                self._ask_human(self.ask_human, calls[0], shape, options, tool_call, decision), pending
            )
        elif decision.behavior == "ask" and self.gates is not None:
            await self._wait_logged()  # the request is in the log before its gate is opened
            stop, watch = _either(self._cancelled, pending)
            try:
                answer = await self.gates.decide(
                    calls,
                    decision,
                    shape,
                    bound_call_id=baton["bound_call_id"],
                    bound_input_hash=baton["bound_input_hash"],
                    cancelled=stop,
                    withdrawn=pending.cancelled if pending is not None else None,
                )
            finally:
                watch.cancel()
        elif decision.behavior == "ask":
            answer = GateAnswer("deny", NO_HUMAN, f"{decision.message} (nobody can be asked here, so this is denied)")
        if answer is not None and answer.behavior == "park":
            return await self._park(answer, baton)
        if answer is not None:
            decision = Decision(behavior=answer.behavior, reason=answer.reason, message=answer.message)  # type: ignore[arg-type]
            for key in ("decided_by", "gate_id", "updated_input"):
                if getattr(answer, key) is not None:
                    baton[key] = getattr(answer, key)
            if answer.interrupt:
                baton["interrupt"] = True
        allow = decision.behavior == "allow"
        option_id = choose_option(options, allow)
        if allow and option_id is None:
            allow, option_id = False, choose_option(options, False)
            decision = Decision(behavior="deny", reason="no_allow_option", message="the agent offered no allow option")
            baton.pop("updated_input", None)
        baton.update(decision="allow" if allow else "deny", reason=decision.reason, message=decision.message)
        # The decision is an effect baton performs: it waits for the request to be committed.
        await self._wait_logged()
        if self._cancelled.is_set():
            baton.update(decision="deny", reason="cancelled", message="the turn was cancelled")
            baton.pop("updated_input", None)
            option_id = None
        outcome: AllowedOutcome | DeniedOutcome = (
            AllowedOutcome(outcome="selected", option_id=option_id)
            if option_id is not None
            else DeniedOutcome(outcome="cancelled")
        )
        return RequestPermissionResponse(outcome=outcome, field_meta={"baton": baton})

    async def _ask_human(
        self,
        ask: AskHuman,
        call: ToolCall,
        shape: GateShape | None,
        options: list[PermissionOption],
        tool_call: Any,
        decision: Decision,
    ) -> GateAnswer:
        """The human's answer to a call: a question is asked question by question, anything else
        (a plan review too) with the agent's own options."""
        if shape is not None and shape.kind == "question":
            return await _ask_questions(ask, call, tool_call)
        chosen = await ask(options, tool_call, decision)
        if not any(option.option_id == chosen and option.kind in _ALLOW_KINDS for option in options):
            return GateAnswer("deny", "human", "denied by the user", decided_by="human")
        if shape is not None and shape.kind == "plan_review":  # the run leaves plan, as with a gate
            await (self.on_mode or _set_gatekeeper_mode(self.gatekeeper))(MODE_AFTER_PLAN)
        # Claude Code runs an approved ExitPlanMode only with its input handed back (baton.gates.kinds).
        updated = dict(call.input) if call.tool_name == PLAN_TOOL else None
        return GateAnswer("allow", "human", "approved by the user", decided_by="human", updated_input=updated)

    async def _park(self, answer: GateAnswer, baton: dict[str, Any]) -> RequestPermissionResponse:
        """The run parks: baton's Claude adapter answers ``defer``; any other agent gets no answer
        (the executor stops it, and on resume it proposes the call again)."""
        if self.agent is not None:
            await asyncio.Future()  # never answered: the connection is closed under it
        baton.update(decision="defer", reason=answer.reason, message=answer.message, gate_id=answer.gate_id)
        await self._wait_logged()
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"), field_meta={"baton": baton})

    def _proxied(self, calls: list[ToolCall], described: dict[str, Any]) -> str | None:
        """``mcp__SERVER__TOOL`` when the request is the agent's own for a tool of a server behind
        baton's MCP proxy: the proxy decides the call when it is made, so it is not asked twice.
        baton's Claude adapter names it so itself; a subprocess agent's request is recognised by
        its registry entry's ``mcp_call`` (an agent without one is decided here as it comes)."""
        if not self.mcp_servers or len(calls) != 1:
            return None
        if self.agent is None:
            server, sep, tool = calls[0].tool_name.removeprefix("mcp__").partition("__")
            named = calls[0].tool_name.startswith("mcp__") and bool(sep and tool) and server in self.mcp_servers
            return calls[0].tool_name if named else None
        found = self.agent.mcp_call(described, self.mcp_servers) if self.agent.mcp_call is not None else None
        return f"mcp__{found[0]}__{found[1]}" if found is not None and found[0] in self.mcp_servers else None

    def _calls(self, tool_call: Any, meta: dict[str, Any]) -> list[ToolCall]:
        found = meta.get("baton")
        extra: dict[str, Any] = found if isinstance(found, dict) else {}
        raw_input = extra.get("input", getattr(tool_call, "raw_input", None))
        raw = raw_input if isinstance(raw_input, dict) else {}
        call_id = str(extra.get("tool_use_id") or tool_call.tool_call_id)
        kind = extra.get("kind") or getattr(tool_call, "kind", None)
        if "input" not in extra and self.agent is not None and self.agent.tool_calls is not None:
            if not raw:  # Gemini sends no rawInput: what the human sees of the call decides
                described = tool_call.model_dump(by_alias=True, exclude_none=True)
                raw = {key: described[key] for key in ("title", "locations", "content") if key in described}
            calls = self.agent.tool_calls(call_id, None if kind is None else str(kind), raw)
            if calls and self.agent.annotation is not None:  # the agent names its tool (Qwen Code's _meta.toolName)
                named = self.agent.annotation(tool_call.model_dump(by_alias=True, exclude_none=True)).get("tool_name")
                if isinstance(named, str):
                    calls = [replace(call, tool_name=named) for call in calls]
            if calls:
                return calls
        name = str(extra.get("tool_name") or getattr(tool_call, "title", None) or "unknown")
        return [ToolCall(tool_name=name, input=raw, tool_call_id=call_id, kind=str(kind or "other"))]

    async def session_update(self, session_id: str, update: Any, **meta: Any) -> None:
        kind = getattr(update, "session_update", None)
        late = is_after_turn(update)
        if late:
            self.session.late_updates += 1
        if kind in _SESSION_KINDS:  # not every chunk: this is the hot path
            data = update.model_dump(by_alias=True, exclude_none=True)
            self.session.apply(data)
            if kind == "usage_update" and not late:  # a late one is its own turn's, not this one's
                self.last_usage_update = data
        elif kind == "plan" and not late:
            self.last_plan = plan_text([entry.model_dump() for entry in getattr(update, "entries", None) or ()])

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        workspace = self._require_workspace()
        try:
            return ReadTextFileResponse(content=await workspace.read_text_file(path, line, limit))
        except WorkspaceError as exc:
            raise workspace_error(exc) from exc

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        workspace = self._require_workspace()
        try:
            await workspace.write_text_file(path, content)
        except WorkspaceError as exc:
            raise workspace_error(exc) from exc
        return WriteTextFileResponse()

    def _require_workspace(self) -> Workspace:
        if self.workspace is None:
            raise RequestError.method_not_found("fs")
        return self.workspace

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)


def _either(cancelled: asyncio.Event, pending: PendingRequest | None) -> tuple[asyncio.Event, asyncio.Future[Any]]:
    """An event set when the turn is cancelled or the agent withdraws ``pending``, and the task
    that watches for it (cancel it when done)."""
    if pending is None:
        return cancelled, asyncio.get_running_loop().create_future()
    either = asyncio.Event()

    async def watch() -> None:
        waits = {asyncio.ensure_future(cancelled.wait()), asyncio.ensure_future(pending.cancelled.wait())}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            either.set()
        finally:
            for wait in waits:
                wait.cancel()

    return either, asyncio.ensure_future(watch())


def _set_gatekeeper_mode(gatekeeper: Gatekeeper) -> Callable[[str], Awaitable[None]]:
    async def set_mode(mode: str) -> None:
        gatekeeper.set_mode(mode)

    return set_mode


async def _ask_questions(ask: AskHuman, call: ToolCall, tool_call: Any) -> GateAnswer:
    """Claude's ``AskUserQuestion`` put to a human one question at a time, each option of the
    question an option to pick (a multi-select question too: a permission request takes one
    choice), plus one to decline. Every question answered: allowed with Claude's ``answers``
    (``{question text: label}``); one declined or dismissed: denied."""
    questions = call.input.get("questions")
    answers: dict[str, str] = {}
    for question in questions if isinstance(questions, list) else []:
        if not isinstance(question, dict):
            continue
        text = str(question.get("question") or question.get("header") or "")
        labels = [str(o["label"]) for o in question.get("options") or [] if isinstance(o, dict) and o.get("label")]
        offered = [
            PermissionOption(option_id=f"answer-{i}", name=label, kind="allow_once") for i, label in enumerate(labels)
        ]
        offered.append(PermissionOption(option_id="decline", name="Don't answer", kind="reject_once"))
        chosen = await ask(
            offered, tool_call.model_copy(update={"title": text}), Decision("ask", "gate:question", text)
        )
        picked = next((o for o in offered if o.option_id == chosen and o.kind == "allow_once"), None)
        if picked is None:
            return GateAnswer("deny", "human", f"the user did not answer: {text}", decided_by="human")
        answers[text] = picked.name
    if not answers:
        return GateAnswer("deny", "human", "the question has no options to answer with", decided_by="human")
    return GateAnswer(
        "allow", "human", "answered by the user", decided_by="human", updated_input={**call.input, "answers": answers}
    )


def _shape(call: ToolCall, last_plan: str | None) -> GateShape | None:
    """The question or plan-review gate a call opens (baton.gates.kinds), or None: a tool call."""
    return gate_for_call(call, last_plan=last_plan)


def _combine(decisions: list[Decision]) -> Decision:
    """Several calls in one request (a patch of several files): the strictest decision wins."""
    return max(decisions, key=lambda decision: _RANK[decision.behavior])


class AgentNormalizer:
    """Adds baton's names to an agent's tool calls (:func:`annotate`) before the tap logs them."""

    def __init__(self, inner: Transport, agent: AgentEntry) -> None:
        self._inner = inner
        self._tool_names = agent.tool_names
        self._annotation = agent.annotation

    async def send(self, message: dict[str, Any]) -> None:
        await self._inner.send(message)

    async def receive(self) -> dict[str, Any] | None:
        message = await self._inner.receive()
        if message is not None:
            annotate(message, self._tool_names, self._annotation)
        return message

    async def close(self) -> None:
        await self._inner.close()


def annotate(
    message: dict[str, Any],
    tool_names: Mapping[str, str],
    annotation: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> None:
    """Put ``command`` (one string) and ``tool_name`` (baton's) in ``_meta.baton`` of a tool call
    or a permission request whose call runs a command or applies a patch, and whatever the agent's
    own ``annotation`` (its registry entry's) finds in a tool call or update."""
    method = message.get("method")
    if method != "session/update" and method != "session/request_permission":
        return
    params = message.get("params")
    if not isinstance(params, dict):
        return
    if method == "session/request_permission":
        _annotate(params, params.get("toolCall"), tool_names, None)
        return
    update = params.get("update")
    if isinstance(update, dict) and update.get("sessionUpdate") in ("tool_call", "tool_call_update"):
        _annotate(update, update, tool_names, annotation)


def _annotate(
    holder: dict[str, Any],
    tool_call: Any,
    tool_names: Mapping[str, str],
    annotation: Callable[[dict[str, Any]], dict[str, Any]] | None,
) -> None:
    if not isinstance(tool_call, dict):
        return
    extra: dict[str, Any] = annotation(tool_call) if annotation is not None else {}
    raw = tool_call.get("rawInput") or tool_call.get("rawOutput")
    if isinstance(raw, dict):
        command = raw.get("command")
        if isinstance(command, list | str) and command:
            extra["command"] = command_string(command)
            extra["tool_name"] = tool_names.get("exec_command", "Bash")
        elif "changes" in raw:
            extra["tool_name"] = tool_names.get("apply_patch", "Edit")
    if not extra:
        return
    meta = holder.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    baton = meta.get("baton")
    holder["_meta"] = {**meta, "baton": {**(baton if isinstance(baton, dict) else {}), **extra}}
