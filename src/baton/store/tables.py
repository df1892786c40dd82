"""The tables as of the newest migration (the migrations themselves never import this).

``runs.run_key`` is an integer surrogate key: log rows reference it instead of the text id,
since the ``(run, seq)`` index roughly halves insert speed and an integer key keeps it small.
It is the primary key because SQLite only auto-assigns integers to an ``INTEGER PRIMARY
KEY``; ``runs.id`` is unique and is the key every API speaks.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, ForeignKey, Index, Integer, MetaData, Table, Text

__all__ = ["log_entries", "metadata", "runs"]

metadata = MetaData()

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
    Index("ix_runs_status", "status"),
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
)
