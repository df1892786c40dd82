"""Run results: ``runs.result`` (what a run delivered: its branch, head commit, push, merge and
pull request; baton.results).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# JSON text on SQLite, JSONB on Postgres (as in baton.store.tables, which migrations never import).
JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column("runs", sa.Column("result", JSON))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("result")
