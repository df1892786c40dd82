"""The store: tasks, runs and their session logs (SQLAlchemy + Alembic; SQLite by default).

See ``docs/store.md`` for the tables and the log's commit and visibility semantics.

``Store``, ``SessionLog`` and ``LogWriteError`` are imported on first use: they pull in
SQLAlchemy (~0.5 s), and what only reads a SQLite store (:mod:`baton.store.reads`) or needs a
record type should not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.lazy import lazy_exports
from baton.store.records import RUN_STATUSES, RunRecord, RunStatus, TaskRecord, Transition, new_run_id
from baton.store.redact import REDACTED, Redactor

if TYPE_CHECKING:
    from baton.store.log import LogWriteError, SessionLog
    from baton.store.store import LockedRun, Store

__all__ = [
    "REDACTED",
    "RUN_STATUSES",
    "LockedRun",
    "LogWriteError",
    "Redactor",
    "RunRecord",
    "RunStatus",
    "SessionLog",
    "Store",
    "TaskRecord",
    "Transition",
    "new_run_id",
]

_LAZY = {
    "LockedRun": "baton.store.store",
    "LogWriteError": "baton.store.log",
    "SessionLog": "baton.store.log",
    "Store": "baton.store.store",
}


__getattr__ = lazy_exports(__name__, _LAZY)
