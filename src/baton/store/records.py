"""A run as the store holds it, and how run ids are made.

Run ids are ``run_`` + a lowercase ULID (26 Crockford base-32 characters: 48 bits of
milliseconds since the epoch, then 80 random bits), so ids sort by creation time, are safe
in URLs and in file names on case-insensitive file systems, e.g. ``run_01jf3m5k2x9q8w7v6t5s4r3p2n``.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal, get_args

__all__ = [
    "RUN_MODES",
    "RUN_STATUSES",
    "TERMINAL_STATUSES",
    "RunMode",
    "RunRecord",
    "RunStatus",
    "TaskRecord",
    "Transition",
    "new_gate_id",
    "new_run_id",
    "new_task_id",
]

RunStatus = Literal["queued", "running", "paused", "interrupted", "finished", "failed", "cancelled"]
RunMode = Literal["background", "interactive"]
RUN_STATUSES: Final[frozenset[str]] = frozenset(get_args(RunStatus))
RUN_MODES: Final[frozenset[str]] = frozenset(get_args(RunMode))
TERMINAL_STATUSES: Final[frozenset[str]] = frozenset({"finished", "failed", "cancelled"})

_CROCKFORD: Final = "0123456789abcdefghjkmnpqrstvwxyz"


def _ulid() -> str:
    value = (time.time_ns() // 1_000_000) << 80 | secrets.randbits(80)
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_run_id() -> str:
    return "run_" + _ulid()


def new_task_id() -> str:
    return "task_" + _ulid()


def new_gate_id() -> str:
    return "gate_" + _ulid()


@dataclass(frozen=True)
class TaskRecord:
    """One row of ``tasks``: what to do (docs/design.md "Concepts")."""

    id: str
    prompt: str
    repo: str | None
    title: str | None
    metadata: dict[str, Any]
    created_at: str
    owner: str | None = None  # who created it (the server's token ``sub``); None from the CLI

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Transition:
    """One change of a run's status; ``from_status`` is None for the run's creation."""

    from_status: str | None
    to_status: str
    reason: str | None
    at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunRecord:
    """One row of ``runs``; :meth:`to_dict` is the run object of docs/design.md."""

    id: str
    task_id: str | None
    agent: str
    model: str | None
    permission_mode: str
    run_mode: str
    status: str
    status_reason: str | None
    repo: str | None
    cwd: str | None
    agent_session_id: str | None
    budget_usd: float | None
    total_cost_usd: float | None
    created_at: str
    started_at: str | None
    finished_at: str | None
    error_code: str | None
    error_message: str | None
    resumed_from: str | None
    owner: str | None
    executor_id: str | None
    heartbeat_at: str | None
    budget_turns: int | None
    budget_seconds: float | None
    # What it was asked to do beyond the columns above (prompt, allow/deny/ask, agent command);
    # None for runs recorded before baton kept it, and runs continuing an ended one.
    request: dict[str, Any] | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def to_dict(self) -> dict[str, Any]:
        fields = asdict(self)
        return {name: fields[name] for name in _PUBLIC_FIELDS}


_PUBLIC_FIELDS: Final = (
    "id",
    "task_id",
    "agent",
    "model",
    "permission_mode",
    "run_mode",
    "status",
    "status_reason",
    "created_at",
    "finished_at",
    "total_cost_usd",
    "repo",
)
