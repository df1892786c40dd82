"""Alembic environment: baton runs migrations programmatically on a connection it passes in."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError("baton migrations run through baton.store.migrate, which passes a connection")

# render_as_batch: SQLite can alter a table only by copying it, which batch mode does.
context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
