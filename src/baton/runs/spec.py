"""What a run is asked to do, and how it ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["EXIT_CODES", "RunOutcome", "RunSpec"]

RunEnd = Literal["finished", "failed", "cancelled", "paused"]  # paused: parked on a gate (not an end)

# DESIGN.md "CLI contract": 0 finished, 1 failed, 2 usage, 3 refused, 4 paused, 5 cancelled.
EXIT_CODES: dict[str, int] = {"finished": 0, "failed": 1, "cancelled": 5, "paused": 4}


@dataclass(frozen=True)
class RunSpec:
    prompt: str
    repo: Path
    agent: str = "claude"
    model: str | None = None
    permission_mode: str = "default"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    budget_usd: float | None = None
    budget_turns: int | None = None  # --max-turns: the agent's model turns (baton.gates.budget)
    budget_seconds: float | None = None  # --max-seconds: the time of the run's turns
    task_id: str | None = None
    run_mode: Literal["background", "interactive"] = "background"
    agent_command: tuple[str, ...] = ()  # --agent-cmd: any ACP agent (agent "command")
    trust_agent_permissions: bool = False  # only what that agent asks is gated
    run_id: str | None = None  # the run's id (baton agent-server --run-id); a new one by default
    owner: str | None = None  # the token sub the run belongs to (HTTP)


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    status: RunEnd
    stop_reason: str | None = None
    code: str | None = None
    message: str | None = None
    total_cost_usd: float | None = None
    duration_ms: int | None = None
    num_turns: int | None = None
    result: str | None = None
    usage: dict[str, Any] | None = field(default=None)
    gate_id: str | None = None  # paused: the gate the run parked on

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]
