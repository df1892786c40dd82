"""The host: baton's ACP *client* side of a run.

It answers the agent's permission requests through the Gatekeeper (choosing the option by
its ``kind`` and answering with that option's own id) and advertises only what it
implements. Everything the agent says is already in the log (the tapping transport), so
``session/update`` needs no work here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from acp import RequestError
from acp.schema import AllowedOutcome, DeniedOutcome, PermissionOption, RequestPermissionResponse

from baton.gates import Decision, Gatekeeper, ToolCall

__all__ = ["NO_HUMAN_GATES_YET", "BatonHost", "choose_option"]

# Until human gates exist, a policy answer of "ask" is a denial that says why.
NO_HUMAN_GATES_YET = "no_human_gates_yet"

_ALLOW_KINDS = ("allow_once", "allow_always")
_REJECT_KINDS = ("reject_once", "reject_always")


def choose_option(options: list[PermissionOption], allow: bool) -> str | None:
    """The id of the first option of the wanted kind (once before always), or None."""
    for kind in _ALLOW_KINDS if allow else _REJECT_KINDS:
        for option in options:
            if option.kind == kind:
                return option.option_id
    return None


class BatonHost:
    """The ACP client a run's agent talks to."""

    def __init__(self, gatekeeper: Gatekeeper, wait_logged: Callable[[], Awaitable[None]]) -> None:
        self.gatekeeper = gatekeeper
        self._wait_logged = wait_logged

    async def request_permission(
        self, options: list[PermissionOption], session_id: str, tool_call: Any, **meta: Any
    ) -> RequestPermissionResponse:
        found = meta.get("baton")
        extra: dict[str, Any] = found if isinstance(found, dict) else {}
        raw_input = extra.get("input", getattr(tool_call, "raw_input", None))
        call = ToolCall(
            tool_name=str(extra.get("tool_name") or getattr(tool_call, "title", None) or "unknown"),
            input=raw_input if isinstance(raw_input, dict) else {},
            tool_call_id=str(extra.get("tool_use_id") or tool_call.tool_call_id),
            kind=str(extra.get("kind") or getattr(tool_call, "kind", None) or "other"),
        )
        decision = self.gatekeeper.decide(call)
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
        # The decision is an effect baton performs: it waits for the request to be committed.
        await self._wait_logged()
        outcome: AllowedOutcome | DeniedOutcome = (
            AllowedOutcome(outcome="selected", option_id=option_id)
            if option_id is not None
            else DeniedOutcome(outcome="cancelled")
        )
        return RequestPermissionResponse(
            outcome=outcome,
            field_meta={
                "baton": {
                    "decision": "allow" if allow else "deny",
                    "reason": decision.reason,
                    "message": decision.message,
                }
            },
        )

    async def session_update(self, session_id: str, update: Any, **meta: Any) -> None:
        return None

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)
