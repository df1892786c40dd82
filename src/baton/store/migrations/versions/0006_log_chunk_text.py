"""``log_entries.chunk_text``: an agent_message_chunk's text beside its payload, written by the
session log (``baton.store._writer.chunk_text``), so that rebuilding a conversation from the
store reads the text of the chunks (three quarters of a long run's entries) without decoding
their payloads. NULL for every other entry; entries written before this revision keep NULL
and are decoded as before (no backfill: a rebuild reads them correctly, only not faster).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("log_entries", sa.Column("chunk_text", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("log_entries") as batch:
        batch.drop_column("chunk_text")
