"""What a webhook says: the events (``gate.opened``, ``gate.resolved``, ``run.finished``,
``run.failed``) made from the store's rows, and the body of one attempt.

A body is JSON::

    {"id": "gate.opened:gate_…", "event": "gate.opened", "timestamp": 1764670000,
     "attempt": 1, "created_at": "2026-12-02T10:00:00.123Z",
     "run": {"id", "task_id", "agent", "model", "status", "status_reason", "repo", "owner",
             "created_at", "finished_at", "total_cost_usd", "error_code", "error_message"},
     "gate": {… the gate object of the API (gate events only) …}}

``id`` names the event (the same on every attempt, from any process: a receiver ignores one it
has handled); ``timestamp`` is when this attempt was sent (Unix seconds, signed with the body).
"""

from __future__ import annotations

import json
from typing import Any, Final

from baton.store.records import GateRecord, RunRecord

__all__ = ["RUN_FIELDS", "body_of", "gate_data", "run_data", "run_event"]

RUN_FIELDS: Final = (
    "id", "task_id", "agent", "model", "status", "status_reason", "repo", "owner", "created_at", "finished_at",
    "total_cost_usd", "error_code", "error_message",
)  # fmt: skip


def run_data(run: RunRecord) -> dict[str, Any]:
    return {name: getattr(run, name) for name in RUN_FIELDS}


def gate_data(gate: GateRecord, run: RunRecord) -> dict[str, Any]:
    return {"run": run_data(run), "gate": gate.to_json()}


def run_event(run: RunRecord) -> str:
    """``run.finished`` or ``run.failed`` for an ended run."""
    return "run.finished" if run.status == "finished" else "run.failed"


def body_of(
    event_key: str, event: str, created_at: str, data: dict[str, Any], *, timestamp: int, attempt: int
) -> bytes:
    """The exact bytes POSTed (and signed) for one attempt."""
    body = {"id": event_key, "event": event, "timestamp": timestamp, "attempt": attempt, "created_at": created_at}
    return json.dumps({**body, **data}, separators=(",", ":"), ensure_ascii=False).encode()
