"""A run (and a task, a status change, a gate) as the store holds it, and how ids are made.

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
    "DECISION_INBOX_KIND",
    "GATE_STATUSES",
    "RUN_MODES",
    "RUN_STATUSES",
    "TERMINAL_STATUSES",
    "GateKind",
    "GateRecord",
    "GateStatus",
    "RunMode",
    "RunRecord",
    "RunStatus",
    "TaskRecord",
    "Transition",
    "chunk_text",
    "new_gate_id",
    "new_run_id",
    "new_task_id",
]

RunStatus = Literal["queued", "running", "paused", "interrupted", "finished", "failed", "cancelled"]
RunMode = Literal["background", "interactive"]
RUN_STATUSES: Final[frozenset[str]] = frozenset(get_args(RunStatus))
RUN_MODES: Final[frozenset[str]] = frozenset(get_args(RunMode))
TERMINAL_STATUSES: Final[frozenset[str]] = frozenset({"finished", "failed", "cancelled"})
DECISION_INBOX_KIND: Final = "gate_decision"  # the inbox command a gate decision wakes its run with
GateKind = Literal["tool", "question", "plan_review", "resource_limit"]
GateStatus = Literal["pending", "approved", "denied", "answered", "expired", "superseded"]
GATE_STATUSES: Final[frozenset[str]] = frozenset(get_args(GateStatus))

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
    # What it delivered (baton.results): ``branch, commit, base, repository, pushed_to?,
    # merged_into?, pull_request_url?``; None until a branch is made.
    result: dict[str, Any] | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def workspace(self) -> dict[str, Any]:
        """The run object's ``workspace``: where the run worked (``runs.request.workspace``; a run
        recorded without one worked in place, in its repository) and the branch it left."""
        request = self.request if isinstance(self.request, dict) else {}
        asked = request.get("workspace")
        asked = asked if isinstance(asked, dict) else {}
        result = self.result if isinstance(self.result, dict) else {}
        return {
            "kind": asked.get("kind") or "in-place",
            "path": asked.get("path") or self.repo or self.cwd,
            "base_commit": asked.get("base_commit") or result.get("base"),
            "branch": result.get("branch"),
            "head_commit": result.get("commit"),
            "pull_request_url": result.get("pull_request_url"),
        }

    def to_dict(self) -> dict[str, Any]:
        fields = asdict(self)
        body = {name: fields[name] for name in _PUBLIC_FIELDS}
        body.update(self.public_workspace())
        return body

    def public_workspace(self) -> dict[str, Any]:
        """The run object's ``repo`` (the user's repository, not the worktree or clone it ran in:
        ``runs.request.workspace.repo``) and ``workspace``."""
        request = self.request if isinstance(self.request, dict) else {}
        asked = request.get("workspace")
        repo = asked.get("repo") if isinstance(asked, dict) else None
        return {"repo": repo or self.repo, "workspace": self.workspace}


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
    "error_code",
    "error_message",
    "repo",
)


@dataclass(frozen=True)
class GateRecord:
    """One gate as stored; :meth:`to_json` is docs/design.md's gate object (CLI ``--json``, HTTP)."""

    id: str
    run_id: str
    kind: GateKind
    status: GateStatus
    tool_name: str | None
    tool_call_id: str | None
    bound_call_id: str | None
    bound_input_hash: str | None
    input: dict[str, Any] | None
    questions: list[Any] | None
    plan: str | None
    summary: str
    created_at: str
    expires_at: str | None
    decision: dict[str, Any] | None
    decided_by: str | None
    decided_at: str | None

    @property
    def is_pending(self) -> bool:
        return self.status == "pending"

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "run_id": self.run_id,
            "kind": self.kind,
            "status": self.status,
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
            "bound_call_id": self.bound_call_id,
            "bound_input_hash": self.bound_input_hash,
            "input": self.input,
            "summary": self.summary,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
        }
        if self.questions is not None:
            body["questions"] = self.questions
        if self.plan is not None:
            body["plan"] = self.plan
        if self.decision is not None:
            body["decision"] = self.decision
            body["decided_by"] = self.decided_by
            body["decided_at"] = self.decided_at
        return body


def chunk_text(method: str | None, payload: dict[str, Any]) -> str | None:
    """The ``log_entries.chunk_text`` column of an entry: the text of an agent_message_chunk that
    :meth:`baton.runs.conversation.Conversation.apply` folds (not replayed, a non-empty string),
    None for every other entry. A rebuild reads the text instead of decoding the payload, so
    this says exactly what the fold would take from the payload (tests/runs/test_conversation.py).
    Written by every writer of ``log_entries`` (the session log, a locked run, an import).
    """
    if method != "session/update":
        return None
    params = payload.get("params")
    if type(params) is not dict:
        return None
    update = params.get("update")
    if type(update) is not dict or update.get("sessionUpdate") != "agent_message_chunk":
        return None
    if _replayed(params) or _replayed(update):
        return None
    content = update.get("content")
    text = content.get("text") if type(content) is dict else None
    return text if type(text) is str and text else None


def _replayed(holder: dict[str, Any]) -> bool:
    meta = holder.get("_meta")
    if not meta or type(meta) is not dict:
        return False
    baton = meta.get("baton")
    return type(baton) is dict and baton.get("replay") is True
