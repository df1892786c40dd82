"""The host: baton's ACP *client* side of a run.

It answers the agent's permission requests through the Gatekeeper (choosing the option by
its ``kind`` and answering with that option's own id), serves ``fs/*`` confined to the
workspace, and advertises only what it implements (no terminals). Everything the agent says
is already in the log (the tapping transport), so ``session/update`` needs no work here
beyond remembering the latest ``usage_update``.

:class:`AgentNormalizer` sits between an agent's transport and the tap: it adds
``_meta.baton.command`` (one string; Codex sends argv arrays) and ``_meta.baton.tool_name``
(baton's name for the agent's tool) to tool calls, so the runner-event projection stays
agent-agnostic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from acp import RequestError
from acp._transport import Transport
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

from baton.acp.workspace import Workspace, workspace_error
from baton.agents.registry import AgentEntry, bound_input_hash
from baton.errors import WorkspaceError
from baton.events.commands import command_string
from baton.gates import Decision, Gatekeeper, ToolCall

__all__ = ["NO_HUMAN_GATES_YET", "AgentNormalizer", "AskHuman", "BatonHost", "annotate", "choose_option"]

# Until human gates exist, a policy answer of "ask" is a denial that says why.
NO_HUMAN_GATES_YET = "no_human_gates_yet"

# Someone who can answer a permission the policy says to *ask* about (``baton acp``: the editor's
# user): given the agent's options, its tool call and the policy's decision, True to allow.
AskHuman = Callable[[list[PermissionOption], Any, Decision], Awaitable[bool]]

_ALLOW_KINDS = ("allow_once", "allow_always")
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
    ) -> None:
        self.gatekeeper = gatekeeper
        self.ask_human = ask_human
        self._wait_logged = wait_logged
        self.agent = agent
        self.workspace = workspace
        self.last_usage_update: dict[str, Any] | None = None
        self._cancelled = asyncio.Event()

    def cancel_pending(self) -> None:
        """The turn is being cancelled: permission requests in flight are answered ``cancelled``."""
        self._cancelled.set()

    def turn_started(self) -> None:
        self._cancelled = asyncio.Event()
        self.last_usage_update = None

    async def request_permission(
        self, options: list[PermissionOption], session_id: str, tool_call: Any, **meta: Any
    ) -> RequestPermissionResponse:
        calls = self._calls(tool_call, meta)
        decision = _combine([self.gatekeeper.decide(call) for call in calls])
        decided_by = "policy"
        if decision.behavior == "ask" and self.ask_human is not None:
            await self._wait_logged()  # the request is in the log before anyone is asked
            allowed = await self.ask_human(options, tool_call, decision)
            decided_by = "human"
            decision = Decision(
                behavior="allow" if allowed else "deny",
                reason="human",
                message="approved by the user" if allowed else "denied by the user",
            )
        if decision.behavior == "ask":
            decision = Decision(
                behavior="deny",
                reason=NO_HUMAN_GATES_YET,
                message=f"{decision.message} (baton cannot ask a human yet, so this is denied)",
            )
        allow = decision.behavior == "allow"
        option_id = choose_option(options, allow)
        if allow and option_id is None:
            allow, option_id = False, choose_option(options, False)
            decision = Decision(behavior="deny", reason="no_allow_option", message="the agent offered no allow option")
        baton: dict[str, Any] = {"decision": "allow" if allow else "deny", "reason": decision.reason}
        baton["message"] = decision.message
        if decided_by == "human":
            baton["decided_by"] = "human"
        if self.agent is not None:
            bound = self.agent.bound_input(tool_call.model_dump(by_alias=True, exclude_none=True))
            baton["bound_call_id"] = tool_call.tool_call_id
            baton["bound_input_hash"] = bound_input_hash(bound)
            baton["tool_name"] = calls[0].tool_name
        # The decision is an effect baton performs: it waits for the request to be committed.
        await self._wait_logged()
        if self._cancelled.is_set():
            baton.update(decision="deny", reason="cancelled", message="the turn was cancelled")
            option_id = None
        outcome: AllowedOutcome | DeniedOutcome = (
            AllowedOutcome(outcome="selected", option_id=option_id)
            if option_id is not None
            else DeniedOutcome(outcome="cancelled")
        )
        return RequestPermissionResponse(outcome=outcome, field_meta={"baton": baton})

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
            if calls:
                return calls
        name = str(extra.get("tool_name") or getattr(tool_call, "title", None) or "unknown")
        return [ToolCall(tool_name=name, input=raw, tool_call_id=call_id, kind=str(kind or "other"))]

    async def session_update(self, session_id: str, update: Any, **meta: Any) -> None:
        if getattr(update, "session_update", None) == "usage_update":
            self.last_usage_update = update.model_dump(by_alias=True, exclude_none=True)

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


def _combine(decisions: list[Decision]) -> Decision:
    """Several calls in one request (a patch of several files): the strictest decision wins."""
    return max(decisions, key=lambda decision: _RANK[decision.behavior])


class AgentNormalizer:
    """Adds baton's names to an agent's tool calls (:func:`annotate`) before the tap logs them."""

    def __init__(self, inner: Transport, agent: AgentEntry) -> None:
        self._inner = inner
        self._tool_names = agent.tool_names

    async def send(self, message: dict[str, Any]) -> None:
        await self._inner.send(message)

    async def receive(self) -> dict[str, Any] | None:
        message = await self._inner.receive()
        if message is not None:
            annotate(message, self._tool_names)
        return message

    async def close(self) -> None:
        await self._inner.close()


def annotate(message: dict[str, Any], tool_names: Mapping[str, str]) -> None:
    """Put ``command`` (one string) and ``tool_name`` (baton's) in ``_meta.baton`` of a tool call
    or a permission request whose call runs a command or applies a patch."""
    method = message.get("method")
    if method != "session/update" and method != "session/request_permission":
        return
    params = message.get("params")
    if not isinstance(params, dict):
        return
    if method == "session/request_permission":
        _annotate(params, params.get("toolCall"), tool_names)
        return
    update = params.get("update")
    if isinstance(update, dict) and update.get("sessionUpdate") in ("tool_call", "tool_call_update"):
        _annotate(update, update, tool_names)


def _annotate(holder: dict[str, Any], tool_call: Any, tool_names: Mapping[str, str]) -> None:
    if not isinstance(tool_call, dict):
        return
    raw = tool_call.get("rawInput") or tool_call.get("rawOutput")
    if not isinstance(raw, dict):
        return
    extra: dict[str, Any] = {}
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
