"""Webhook deliveries (baton.notify): ``webhook_deliveries`` (one row per event and endpoint, its
attempts and its lease), ``webhook_cursor`` (how far the store has been read for events), and
the indexes that read finds them by (``gates.created_at``, ``gates.decided_at``,
``runs.finished_at``).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# JSON text on SQLite, JSONB on Postgres (as in baton.store.tables, which migrations never import).
JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("event_key", sa.Text, nullable=False),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("run_id", sa.Text, nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("next_attempt_at", sa.Text, nullable=False),
        sa.Column("give_up_at", sa.Text, nullable=False),
        sa.Column("lease_owner", sa.Text),
        sa.Column("lease_until", sa.Text),
        sa.Column("delivered_at", sa.Text),
        sa.Column("last_error", sa.Text),
        sa.UniqueConstraint("url", "event_key", name="uq_webhook_deliveries_url_event_key"),
        sa.Index("ix_webhook_deliveries_status_next", "status", "next_attempt_at"),
    )
    op.create_table(
        "webhook_cursor",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("position", sa.Text, nullable=False),
    )
    op.create_index("ix_gates_created_at", "gates", ["created_at"])
    op.create_index("ix_gates_decided_at", "gates", ["decided_at"])
    op.create_index("ix_runs_finished_at", "runs", ["finished_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_finished_at", "runs")
    op.drop_index("ix_gates_decided_at", "gates")
    op.drop_index("ix_gates_created_at", "gates")
    op.drop_table("webhook_cursor")
    op.drop_table("webhook_deliveries")
