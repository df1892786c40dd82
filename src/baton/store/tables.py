"""The tables as of the newest migration (the migrations themselves never import this).

``runs.run_key`` is an integer surrogate key: log rows reference it instead of the text id,
since the ``(run, seq)`` index roughly halves insert speed and an integer key keeps it small.
It is the primary key because SQLite only auto-assigns integers to an ``INTEGER PRIMARY
KEY``; ``runs.id`` is unique and is the key every API speaks. Every per-run table references
``run_key`` too. JSON columns are JSON text on SQLite and ``JSONB`` on Postgres.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import JSON, Column, Float, ForeignKey, Index, Integer, MetaData, Table, Text, UniqueConstraint
from sqlalchemy.dialects.postgresql import JSONB

__all__ = [
    "conversation_state",
    "gates",
    "inbox",
    "log_entries",
    "metadata",
    "run_transitions",
    "runner_events",
    "runs",
    "snapshots",
    "tasks",
    "webhook_cursor",
    "webhook_deliveries",
]

JSON_VALUE: Final = JSON().with_variant(JSONB(), "postgresql")

metadata = MetaData()


def _run_key(primary_key: bool = False) -> Column[int]:
    return Column(
        "run_key", Integer, ForeignKey("runs.run_key"), nullable=False, primary_key=primary_key, autoincrement=False
    )


tasks = Table(
    "tasks",
    metadata,
    Column("id", Text, primary_key=True),
    Column("prompt", Text, nullable=False),
    Column("repo", Text),
    Column("title", Text),
    Column("metadata", JSON_VALUE),
    Column("created_at", Text, nullable=False),
    Column("owner", Text),  # who created it (the server's token ``sub``); None from the CLI
)

runs = Table(
    "runs",
    metadata,
    Column("run_key", Integer, primary_key=True, autoincrement=True),
    Column("id", Text, nullable=False, unique=True),
    Column("task_id", Text),
    Column("agent", Text, nullable=False),
    Column("model", Text),
    Column("permission_mode", Text, nullable=False),
    Column("run_mode", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("status_reason", Text),
    Column("repo", Text),
    Column("cwd", Text),
    Column("agent_session_id", Text),
    Column("budget_usd", Float),
    Column("total_cost_usd", Float),
    Column("created_at", Text, nullable=False),
    Column("started_at", Text),
    Column("finished_at", Text),
    Column("error_code", Text),
    Column("error_message", Text),
    Column("resumed_from", Text),
    Column("owner", Text),
    Column("executor_id", Text),
    Column("heartbeat_at", Text),
    Column("budget_turns", Integer),
    Column("budget_seconds", Float),
    # What the run was asked to do beyond its columns (prompt, allow/deny/ask, agent command):
    # a queued run whose process died is started from its beginning from this.
    Column("request", JSON_VALUE),
    # What the run delivered (baton.results): its branch, head commit, push, merge, pull request.
    Column("result", JSON_VALUE),
    Index("ix_runs_status", "status"),
    Index("ix_runs_executor_id", "executor_id"),
    Index("ix_runs_finished_at", "finished_at"),  # runs that ended, for webhooks (baton.notify)
)

run_transitions = Table(
    "run_transitions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    _run_key(),
    Column("from_status", Text),
    Column("to_status", Text, nullable=False),
    Column("reason", Text),
    Column("at", Text, nullable=False),
    Index("ix_run_transitions_run_key", "run_key", "id"),
)

log_entries = Table(
    "log_entries",
    metadata,
    Column("run_key", Integer, ForeignKey("runs.run_key"), primary_key=True, autoincrement=False),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("ts", Text, nullable=False),
    Column("direction", Text, nullable=False),
    Column("method", Text),
    Column("payload", Text, nullable=False),
    # An agent_message_chunk's text, as Conversation folds it (baton.store._writer.chunk_text),
    # so that a rebuild need not decode the payload; NULL for every other entry (migration 0006).
    Column("chunk_text", Text),
)

runner_events = Table(
    "runner_events",
    metadata,
    _run_key(primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("log_seq", Integer, nullable=False),
    Column("ts", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("data", JSON_VALUE, nullable=False),
)

inbox = Table(
    "inbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    _run_key(),
    Column("created_at", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("payload", JSON_VALUE, nullable=False),
    Column("taken_at", Text),
    Column("taken_by", Text),
    Index("ix_inbox_run_key_taken_at", "run_key", "taken_at"),
)

conversation_state = Table(
    "conversation_state",
    metadata,
    _run_key(primary_key=True),
    Column("upto_seq", Integer, nullable=False),
    Column("state", JSON_VALUE, nullable=False),
    Column("updated_at", Text, nullable=False),
)

snapshots = Table(
    "snapshots",
    metadata,
    _run_key(primary_key=True),
    Column("id", Text, primary_key=True),
    Column("tree_hash", Text, nullable=False),
    Column("base_commit", Text),
    Column("added", JSON_VALUE, nullable=False),
    Column("modified", JSON_VALUE, nullable=False),
    Column("deleted", JSON_VALUE, nullable=False),
    Column("renamed", JSON_VALUE, nullable=False),
    Column("skipped", JSON_VALUE, nullable=False),
    Column("log_seq_from", Integer),
    Column("log_seq_to", Integer),
    Column("archive_key", Text),
    Column("created_at", Text, nullable=False),
)

gates = Table(
    "gates",
    metadata,
    Column("id", Text, primary_key=True),
    _run_key(),
    Column("kind", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("tool_name", Text),
    Column("tool_call_id", Text),
    Column("bound_call_id", Text),
    Column("bound_input_hash", Text),
    Column("input", JSON_VALUE),
    Column("questions", JSON_VALUE),
    Column("plan", Text),
    Column("summary", Text),
    Column("created_at", Text, nullable=False),
    Column("expires_at", Text),
    Column("decision", JSON_VALUE),
    Column("decided_by", Text),
    Column("decided_at", Text),
    Index("ix_gates_run_key_status", "run_key", "status"),
    Index("ix_gates_created_at", "created_at"),  # gates opened and decided, for webhooks (baton.notify)
    Index("ix_gates_decided_at", "decided_at"),
)

# Webhook deliveries (baton.notify, docs/web.md "Webhooks"): one row per event and endpoint
# (``event_key`` names the event: ``gate.opened:<gate id>``, ``run.finished:<run id>``), kept
# apart from the run's log, which only its executor writes. ``lease_owner``/``lease_until`` is
# the compare-and-set claim of the process sending it now.
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("url", Text, nullable=False),
    Column("event_key", Text, nullable=False),
    Column("event", Text, nullable=False),
    Column("run_id", Text, nullable=False),
    Column("data", JSON_VALUE, nullable=False),
    Column("status", Text, nullable=False),  # pending, delivered, failed
    Column("attempts", Integer, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("next_attempt_at", Text, nullable=False),
    Column("give_up_at", Text, nullable=False),
    Column("lease_owner", Text),
    Column("lease_until", Text),
    Column("delivered_at", Text),
    Column("last_error", Text),
    UniqueConstraint("url", "event_key", name="uq_webhook_deliveries_url_event_key"),
    Index("ix_webhook_deliveries_status_next", "status", "next_attempt_at"),
)

# How far the store was read for webhook events: one row per webhook URL (``name``).
webhook_cursor = Table(
    "webhook_cursor",
    metadata,
    Column("name", Text, primary_key=True),
    Column("position", Text, nullable=False),
)
