"""Baton's run-level notifications (``_baton/*``), typed; see docs/internals.md."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "AgentSessionParams",
    "ConsoleParams",
    "ErrorParams",
    "ResumeParams",
    "RunStartedParams",
    "StatusParams",
    "TurnCompleteParams",
    "notification",
]

RunStatus = Literal["queued", "running", "paused", "interrupted", "finished", "failed", "cancelled"]


class RunStartedParams(TypedDict):
    run_id: str
    task_id: str | None
    agent: str
    model: str | None
    cwd: str
    permission_mode: str
    run_mode: str
    # The run's own policy rules (a resume rebuilds its Gatekeeper from them).
    allow: NotRequired[list[str]]
    deny: NotRequired[list[str]]
    ask: NotRequired[list[str]]
    resumed_from: NotRequired[str]  # the ended run whose conversation this run continues
    forked_from: NotRequired[dict[str, Any]]  # {run_id, seq, turn, snapshot_id}: baton fork (docs/resume.md)
    prompt: NotRequired[str]  # the task as the user gave it
    agent_command: NotRequired[list[str]]  # --agent-cmd
    trust_agent_permissions: NotRequired[bool]  # only what that agent asks is gated
    model_source: NotRequired[dict[str, Any]]  # where the model comes from (baton.runs.model_source)
    sandbox: NotRequired[str | None]  # --sandbox as asked (None: the configured default)
    mount_ro: NotRequired[list[str]]  # --mount-ro
    mount_rw: NotRequired[list[str]]  # --mount-rw
    allow_net: NotRequired[list[str]]  # --allow-net
    mcp: NotRequired[list[str]]  # --mcp: the run's MCP servers as it named them (baton.mcp.servers)


class AgentSessionParams(TypedDict):
    agent_session_id: str
    adapter: str


class StatusParams(TypedDict):
    status: RunStatus
    reason: str
    code: NotRequired[str]
    message: NotRequired[str]
    stop_reason: NotRequired[str]
    usage: NotRequired[dict[str, Any] | None]
    total_cost_usd: NotRequired[float | None]
    num_turns: NotRequired[int | None]
    duration_ms: NotRequired[int | None]
    result: NotRequired[str | None]
    gate_id: NotRequired[str]  # paused: the gate the run parked on


class TurnCompleteParams(TypedDict):
    stop_reason: str
    usage: dict[str, Any] | None
    total_cost_usd: float | None
    duration_ms: int | None


class ErrorParams(TypedDict):
    code: str
    message: str


class ConsoleParams(TypedDict):
    level: str
    message: str


class ResumeParams(TypedDict):
    path: Literal["native", "rebuilt"]
    interrupted_calls: list[str]
    prompt: str
    decided_gates: NotRequired[list[str]]  # gates decided while the run was parked (or its process dead)
    model_source: NotRequired[dict[str, Any]]  # where this execution's model comes from


def notification(name: str, params: Any) -> dict[str, Any]:
    """The JSON-RPC message logged for ``_baton/<name>``."""
    return {"jsonrpc": "2.0", "method": f"_baton/{name}", "params": dict(params)}
