"""The store: tasks, runs and their session logs (SQLAlchemy + Alembic; SQLite by default).

See ``docs/store.md`` for the tables and the log's commit and visibility semantics.
"""

from baton.store.log import LogWriteError, SessionLog
from baton.store.records import RUN_STATUSES, RunRecord, RunStatus, TaskRecord, Transition, new_run_id
from baton.store.redact import REDACTED, Redactor
from baton.store.store import Store

__all__ = [
    "REDACTED",
    "RUN_STATUSES",
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
