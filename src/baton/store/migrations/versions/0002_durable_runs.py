"""Durable runs: tasks, run ownership and transitions, runner events, inbox, conversation
state, snapshots and gates.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# JSON text on SQLite, JSONB on Postgres (as in baton.store.tables, which migrations never import).
JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def _run_key(primary_key: bool = False) -> sa.Column[int]:
    return sa.Column(
        "run_key",
        sa.Integer,
        sa.ForeignKey("runs.run_key"),
        nullable=False,
        primary_key=primary_key,
        autoincrement=False,
    )


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("prompt", sa.Text, nullable=False),
        sa.Column("repo", sa.Text),
        sa.Column("title", sa.Text),
        sa.Column("metadata", JSON),
        sa.Column("created_at", sa.Text, nullable=False),
    )

    op.add_column("runs", sa.Column("resumed_from", sa.Text))
    op.add_column("runs", sa.Column("owner", sa.Text))
    op.add_column("runs", sa.Column("executor_id", sa.Text))
    op.add_column("runs", sa.Column("heartbeat_at", sa.Text))
    op.add_column("runs", sa.Column("budget_turns", sa.Integer))
    op.add_column("runs", sa.Column("budget_seconds", sa.Float))
    op.create_index("ix_runs_executor_id", "runs", ["executor_id"])

    op.create_table(
        "run_transitions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        _run_key(),
        sa.Column("from_status", sa.Text),
        sa.Column("to_status", sa.Text, nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("at", sa.Text, nullable=False),
    )
    op.create_index("ix_run_transitions_run_key", "run_transitions", ["run_key", "id"])
    # Runs written before this revision get one transition: into the status they hold now.
    op.execute(
        "INSERT INTO run_transitions (run_key, from_status, to_status, reason, at)"
        " SELECT run_key, NULL, status, status_reason, COALESCE(finished_at, started_at, created_at)"
        " FROM runs ORDER BY run_key"
    )

    op.create_table(
        "runner_events",
        _run_key(primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("log_seq", sa.Integer, nullable=False),
        sa.Column("ts", sa.Text, nullable=False),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("data", JSON, nullable=False),
    )

    op.create_table(
        "inbox",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        _run_key(),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("taken_at", sa.Text),
        sa.Column("taken_by", sa.Text),
    )
    op.create_index("ix_inbox_run_key_taken_at", "inbox", ["run_key", "taken_at"])

    op.create_table(
        "conversation_state",
        _run_key(primary_key=True),
        sa.Column("upto_seq", sa.Integer, nullable=False),
        sa.Column("state", JSON, nullable=False),
        sa.Column("updated_at", sa.Text, nullable=False),
    )

    op.create_table(
        "snapshots",
        _run_key(primary_key=True),
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("tree_hash", sa.Text, nullable=False),
        sa.Column("base_commit", sa.Text),
        sa.Column("added", JSON, nullable=False),
        sa.Column("modified", JSON, nullable=False),
        sa.Column("deleted", JSON, nullable=False),
        sa.Column("renamed", JSON, nullable=False),
        sa.Column("skipped", JSON, nullable=False),
        sa.Column("log_seq_from", sa.Integer),
        sa.Column("log_seq_to", sa.Integer),
        sa.Column("archive_key", sa.Text),
        sa.Column("created_at", sa.Text, nullable=False),
    )

    op.create_table(
        "gates",
        sa.Column("id", sa.Text, primary_key=True),
        _run_key(),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("tool_name", sa.Text),
        sa.Column("tool_call_id", sa.Text),
        sa.Column("bound_call_id", sa.Text),
        sa.Column("bound_input_hash", sa.Text),
        sa.Column("input", JSON),
        sa.Column("questions", JSON),
        sa.Column("plan", sa.Text),
        sa.Column("summary", sa.Text),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("expires_at", sa.Text),
        sa.Column("decision", JSON),
        sa.Column("decided_by", sa.Text),
        sa.Column("decided_at", sa.Text),
    )
    op.create_index("ix_gates_run_key_status", "gates", ["run_key", "status"])


def downgrade() -> None:
    op.drop_index("ix_gates_run_key_status", table_name="gates")
    op.drop_table("gates")
    op.drop_table("snapshots")
    op.drop_table("conversation_state")
    op.drop_index("ix_inbox_run_key_taken_at", table_name="inbox")
    op.drop_table("inbox")
    op.drop_table("runner_events")
    op.drop_index("ix_run_transitions_run_key", table_name="run_transitions")
    op.drop_table("run_transitions")
    op.drop_index("ix_runs_executor_id", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        for name in ("budget_seconds", "budget_turns", "heartbeat_at", "executor_id", "owner", "resumed_from"):
            batch.drop_column(name)
    op.drop_table("tasks")
