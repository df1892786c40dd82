"""One running run per workspace, claimed atomically (docs/design.md "Runs across processes").

A workspace is a run's repository (its ``repo``, else its ``cwd``). Recording a run there, or
taking one over, first locks the workspace for the rest of the transaction — Postgres: an
advisory transaction lock keyed by the workspace; SQLite: the transaction began with ``BEGIN
IMMEDIATE`` and holds the database's write lock — then reads the runs that may hold it and
writes only if none does. Two processes claiming the same workspace at the same instant are
serialised: the second reads the first's committed run and is refused with ``workspace_busy``.

Whether a run holds its workspace (its executor still alive) is the caller's judgement
(:data:`Holds`), made inside the transaction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Final

from sqlalchemy import Connection, and_, or_, select, text

from baton.errors import RefusedError
from baton.store.records import RunRecord
from baton.store.tables import runs

__all__ = ["HOLDING_STATUSES", "Holds", "busy_error", "holding_runs", "lock_workspace"]

HOLDING_STATUSES: Final = ("queued", "running", "paused")
Holds = Callable[[RunRecord], bool]  # whether a run in the workspace holds it (its executor is alive)

_RECORD_COLUMNS: Final = [column for column in runs.c if column.name != "run_key"]
_LOCK_CLASS: Final = 0x7773  # "ws": the upper half of the advisory key, apart from the migration lock


def lock_workspace(connection: Connection, workspace: str) -> None:
    """Hold ``workspace`` until the transaction ends (SQLite: already held, see the module doc)."""
    if connection.dialect.name != "postgresql":
        return
    digest = int.from_bytes(hashlib.sha256(workspace.encode()).digest()[:4], "big", signed=True)
    connection.execute(
        text("SELECT pg_advisory_xact_lock(CAST(:kind AS integer), CAST(:key AS integer))"),
        {"kind": _LOCK_CLASS, "key": digest},
    )


def holding_runs(connection: Connection, workspace: str, holds: Holds, *, except_run: str | None) -> list[RunRecord]:
    """Runs in ``workspace`` (other than ``except_run``) that hold it, oldest first."""
    query = (
        select(*_RECORD_COLUMNS)
        .where(
            runs.c.status.in_(HOLDING_STATUSES),
            or_(runs.c.repo == workspace, and_(runs.c.repo.is_(None), runs.c.cwd == workspace)),
        )
        .order_by(runs.c.run_key)
    )
    if except_run is not None:
        query = query.where(runs.c.id != except_run)
    records = [RunRecord(**row._asdict()) for row in connection.execute(query)]
    return [record for record in records if holds(record)]


def busy_error(holder: RunRecord, workspace: str) -> RefusedError:
    """``workspace_busy``, naming the run that holds the workspace."""
    return RefusedError(
        "workspace_busy",
        f"run {holder.id} is {holder.status} in {workspace}; one running run per workspace",
        details={"run_id": holder.id, "status": holder.status},
    )
