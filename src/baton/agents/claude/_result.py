"""Claude's ``result`` message: the ``_baton/usage`` params and the ACP stop reason."""

from __future__ import annotations

from typing import Any

__all__ = ["is_error_result", "stop_reason_for", "usage_params"]

# Claude's model stop reasons that ACP names; everything else ends a turn normally.
# ``tool_deferred`` (a PreToolUse hook answered ``defer``: the run parks) is an ordinary end of
# the turn for ACP; the host knows it parked, and ``_baton/usage`` keeps Claude's own reason.
_MODEL_STOP_REASONS = {"max_tokens": "max_tokens", "refusal": "refusal", "tool_deferred": "end_turn"}
_SUBTYPE_STOP_REASONS = {
    "error_max_turns": "max_turn_requests",
    # a budget is baton's resource_limit gate; ACP's nearest word is "too many requests"
    "error_max_budget_usd": "max_turn_requests",
}


def is_error_result(result_msg: dict[str, Any]) -> bool:
    """A failed turn: an error subtype, or ``success`` with ``is_error`` (Claude on a 5xx/529)."""
    return result_msg.get("is_error") is True or result_msg.get("subtype", "success") != "success"


def usage_params(result_msg: dict[str, Any], *, session_id: str | None = None) -> dict[str, Any]:
    """The ``_baton/usage`` notification params for one ``result`` message (docs/internals.md).

    ``usage``, ``total_cost_usd``, ``duration_ms``, ``num_turns`` and ``stop_reason`` are
    Claude's own values, verbatim; ``is_error`` is :func:`is_error_result`.
    """
    params: dict[str, Any] = {
        "sessionId": session_id if session_id is not None else result_msg.get("session_id"),
        "usage": result_msg.get("usage"),
        "total_cost_usd": result_msg.get("total_cost_usd"),
        "duration_ms": result_msg.get("duration_ms"),
        "num_turns": result_msg.get("num_turns"),
        "stop_reason": result_msg.get("stop_reason"),
        "is_error": is_error_result(result_msg),
        "subtype": result_msg.get("subtype"),
    }
    if "result" in result_msg:
        params["result"] = result_msg["result"]
    params["_meta"] = {"baton": {"source": result_msg}}
    return params


def stop_reason_for(result_msg: dict[str, Any], *, cancel_requested: bool) -> str:
    """The ACP ``stopReason`` of the ``session/prompt`` response for this ``result``.

    ``error_during_execution`` is what an interrupt looks like, so it is ``cancelled`` only
    when baton asked for the interrupt; otherwise, like every other failure, the turn ends
    with ``end_turn`` and the failure travels in ``_baton/usage`` (``is_error``).
    """
    subtype = result_msg.get("subtype")
    if subtype == "error_during_execution":
        return "cancelled" if cancel_requested else "end_turn"
    mapped = _SUBTYPE_STOP_REASONS.get(subtype) if isinstance(subtype, str) else None
    if mapped is not None:
        return mapped
    reason = result_msg.get("stop_reason")
    return _MODEL_STOP_REASONS.get(reason, "end_turn") if isinstance(reason, str) else "end_turn"
