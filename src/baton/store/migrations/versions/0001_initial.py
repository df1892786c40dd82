"""Runs and their session logs.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_key", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.Text, nullable=False, unique=True),
        sa.Column("task_id", sa.Text),
        sa.Column("agent", sa.Text, nullable=False),
        sa.Column("model", sa.Text),
        sa.Column("permission_mode", sa.Text, nullable=False),
        sa.Column("run_mode", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("status_reason", sa.Text),
        sa.Column("repo", sa.Text),
        sa.Column("cwd", sa.Text),
        sa.Column("agent_session_id", sa.Text),
        sa.Column("budget_usd", sa.Float),
        sa.Column("total_cost_usd", sa.Float),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("started_at", sa.Text),
        sa.Column("finished_at", sa.Text),
        sa.Column("error_code", sa.Text),
        sa.Column("error_message", sa.Text),
    )
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_table(
        "log_entries",
        sa.Column("run_key", sa.Integer, sa.ForeignKey("runs.run_key"), primary_key=True, autoincrement=False),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("ts", sa.Text, nullable=False),
        sa.Column("direction", sa.Text, nullable=False),
        sa.Column("method", sa.Text),
        sa.Column("payload", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("log_entries")
    op.drop_index("ix_runs_status", table_name="runs")
    op.drop_table("runs")
