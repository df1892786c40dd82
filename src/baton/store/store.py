"""The store: runs (and, through :class:`~baton.store.log.SessionLog`, their logs).

Blocking database work runs in a worker thread (``asyncio.to_thread``), so every method is
safe to await from the event loop. ``Store.open`` itself blocks (it may migrate): call it at
start-up, or through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final

from sqlalchemy import Engine, Row, insert, select, update
from sqlalchemy.exc import IntegrityError

from baton.errors import NotFoundError, UsageError
from baton.events.entry import utc_timestamp
from baton.store.engine import READ_ONLY, make_engine
from baton.store.migrate import upgrade
from baton.store.records import RUN_MODES, RUN_STATUSES, TERMINAL_STATUSES, RunRecord, new_run_id
from baton.store.tables import runs

__all__ = ["UPDATABLE_FIELDS", "Store"]

UPDATABLE_FIELDS: Final = frozenset(
    {
        "status",
        "status_reason",
        "model",
        "permission_mode",
        "agent_session_id",
        "budget_usd",
        "total_cost_usd",
        "started_at",
        "finished_at",
        "error_code",
        "error_message",
    }
)
_RECORD_COLUMNS: Final = [column for column in runs.c if column.name != "run_key"]


class Store:
    """baton's database; an async context manager whose exit disposes of the engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._closed = False

    @classmethod
    def open(cls, url: str) -> Store:
        """Connect to ``url`` and migrate the database to the newest revision (blocks)."""
        engine = make_engine(url)
        try:
            upgrade(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.engine.dispose()

    async def create_run(
        self,
        *,
        agent: str,
        model: str | None = None,
        permission_mode: str = "default",
        run_mode: str = "background",
        task_id: str | None = None,
        repo: str | None = None,
        cwd: str | None = None,
        budget_usd: float | None = None,
        run_id: str | None = None,
    ) -> RunRecord:
        """Insert a ``queued`` run; ``run_id`` defaults to a new sortable id."""
        if run_mode not in RUN_MODES:
            raise UsageError("invalid_argument", f"run_mode must be one of {sorted(RUN_MODES)}")
        values: dict[str, Any] = {
            "id": run_id or new_run_id(),
            "task_id": task_id,
            "agent": agent,
            "model": model,
            "permission_mode": permission_mode,
            "run_mode": run_mode,
            "status": "queued",
            "repo": repo,
            "cwd": cwd,
            "budget_usd": budget_usd,
            "created_at": utc_timestamp(),
        }
        return await asyncio.to_thread(self._create_run, values)

    async def get_run(self, run_id: str) -> RunRecord:
        """The run, or ``NotFoundError("run_not_found")``."""
        return await asyncio.to_thread(self._get_run, run_id)

    async def list_runs(self, status: str | None = None) -> list[RunRecord]:
        """Runs in creation order, optionally only those with ``status``."""
        return await asyncio.to_thread(self._list_runs, status)

    async def update_run(self, run_id: str, **fields: Any) -> RunRecord:
        """Change a run's fields (see ``UPDATABLE_FIELDS``) and return the new record.

        Moving to ``running`` stamps ``started_at`` and moving to a terminal status stamps
        ``finished_at``, unless given or already set.
        """
        unknown = set(fields) - UPDATABLE_FIELDS
        if unknown:
            raise UsageError("invalid_argument", f"cannot update run fields {sorted(unknown)}")
        status = fields.get("status")
        if status is not None and status not in RUN_STATUSES:
            raise UsageError("invalid_argument", f"unknown run status {status!r}")
        return await asyncio.to_thread(self._update_run, run_id, fields)

    def _create_run(self, values: Mapping[str, Any]) -> RunRecord:
        try:
            with self.engine.begin() as connection:
                connection.execute(insert(runs).values(**values))
                row = connection.execute(select(*_RECORD_COLUMNS).where(runs.c.id == values["id"])).one()
        except IntegrityError as exc:
            raise UsageError("invalid_argument", f"cannot create run {values['id']}: {exc}") from exc
        return _record(row)

    def _get_run(self, run_id: str) -> RunRecord:
        with self.engine.connect().execution_options(**READ_ONLY) as connection:
            row = connection.execute(select(*_RECORD_COLUMNS).where(runs.c.id == run_id)).one_or_none()
        if row is None:
            raise NotFoundError("run_not_found", f"no run {run_id}")
        return _record(row)

    def _list_runs(self, status: str | None) -> list[RunRecord]:
        query = select(*_RECORD_COLUMNS).order_by(runs.c.run_key)
        if status is not None:
            query = query.where(runs.c.status == status)
        with self.engine.connect().execution_options(**READ_ONLY) as connection:
            return [_record(row) for row in connection.execute(query)]

    def _update_run(self, run_id: str, fields: dict[str, Any]) -> RunRecord:
        with self.engine.begin() as connection:
            row = connection.execute(select(*_RECORD_COLUMNS).where(runs.c.id == run_id)).one_or_none()
            if row is None:
                raise NotFoundError("run_not_found", f"no run {run_id}")
            current = _record(row)
            values = dict(fields)
            status = values.get("status")
            if status == "running" and current.started_at is None:
                values.setdefault("started_at", utc_timestamp())
            if status in TERMINAL_STATUSES and current.finished_at is None:
                values.setdefault("finished_at", utc_timestamp())
            if values:
                connection.execute(update(runs).where(runs.c.id == run_id).values(**values))
            row = connection.execute(select(*_RECORD_COLUMNS).where(runs.c.id == run_id)).one()
        return _record(row)


def _record(row: Row[Any]) -> RunRecord:
    return RunRecord(**row._asdict())
