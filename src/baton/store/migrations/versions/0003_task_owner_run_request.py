"""Task owners and run requests: ``tasks.owner`` (moved out of the ``_baton_owner`` metadata key)
and ``runs.request`` (what a run was asked to do, so a queued run whose process died can be
started from its beginning by another process).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# JSON text on SQLite, JSONB on Postgres (as in baton.store.tables, which migrations never import).
JSON = sa.JSON().with_variant(JSONB(), "postgresql")
OWNER_KEY = "_baton_owner"  # where baton's server kept a task's owner before this revision

_tasks = sa.table("tasks", sa.column("id", sa.Text), sa.column("metadata", JSON), sa.column("owner", sa.Text))


def upgrade() -> None:
    op.add_column("tasks", sa.Column("owner", sa.Text))
    op.add_column("runs", sa.Column("request", JSON))
    connection = op.get_bind()
    for task_id, metadata in connection.execute(sa.select(_tasks.c.id, _tasks.c.metadata)).all():
        metadata = _as_dict(metadata)
        if OWNER_KEY not in metadata:
            continue
        owner = metadata.pop(OWNER_KEY)
        connection.execute(
            sa.update(_tasks)
            .where(_tasks.c.id == task_id)
            .values(owner=owner if isinstance(owner, str) else None, metadata=metadata)
        )


def downgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.select(_tasks.c.id, _tasks.c.metadata, _tasks.c.owner)).all()
    for task_id, metadata, owner in rows:
        if owner is not None:
            connection.execute(
                sa.update(_tasks)
                .where(_tasks.c.id == task_id)
                .values(metadata={**_as_dict(metadata), OWNER_KEY: owner})
            )
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("request")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("owner")


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, str):  # a driver that hands JSON back as text
        value = json.loads(value)
    return dict(value) if isinstance(value, dict) else {}
