"""The store: tasks, runs and what belongs to a run besides its log (the log itself is
:class:`~baton.store.log.SessionLog`).

Blocking database work runs in a worker thread (``asyncio.to_thread``), so every method is
safe to await from the event loop. ``Store.open`` itself blocks (it may migrate): call it at
start-up, or through ``asyncio.to_thread``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Final, TypeVar

from sqlalchemy import Engine, bindparam, event, insert, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import ConnectionPoolEntry

from baton.errors import NotFoundError, RefusedError, StorageError, UsageError
from baton.events.entry import utc_timestamp
from baton.store import _gates, _rundata, _summaries, transfer
from baton.store._locked import RECORD_COLUMNS, LockedRun, lock_run, run_record, update_locked_run
from baton.store._writer import run_position
from baton.store.engine import READ_ONLY, make_engine
from baton.store.migrate import upgrade
from baton.store.reads import SqliteReads
from baton.store.records import (
    RUN_MODES,
    RUN_STATUSES,
    GateRecord,
    RunRecord,
    TaskRecord,
    Transition,
    new_run_id,
    new_task_id,
)
from baton.store.redact import Redactor
from baton.store.storage_errors import in_thread, map_storage_errors
from baton.store.tables import run_transitions, runs
from baton.store.transfer import Page, RunHead, RunReader
from baton.store.workspaces import Holds, busy_error, holding_runs, lock_workspace

__all__ = ["UPDATABLE_FIELDS", "LockedRun", "Store"]

T = TypeVar("T")

UPDATABLE_FIELDS: Final = frozenset(
    {
        "status",
        "status_reason",
        "model",
        "permission_mode",
        "agent_session_id",
        "budget_usd",
        "budget_turns",
        "budget_seconds",
        "total_cost_usd",
        "started_at",
        "finished_at",
        "error_code",
        "error_message",
        "resumed_from",
        "owner",
        "executor_id",
        "heartbeat_at",
        "request",
        "result",
        "repo",  # a fleet run's workspace, made on the worker that takes it (docs/fleet.md)
        "cwd",
    }
)
_RECORD_COLUMNS: Final = RECORD_COLUMNS
# Built once: building this select of every column costs more than running it (~0.13 ms each time).
_RUN_BY_ID: Final = select(*_RECORD_COLUMNS).where(runs.c.id == bindparam("run_id"))


class Store:
    """baton's database; an async context manager whose exit disposes of the engine.

    A call cancelled while its worker thread runs (``asyncio.to_thread`` cannot stop the thread)
    may still hold a pooled connection when the store closes: that connection is closed when the
    thread hands it back, never left open in a disposed pool (``_close_late_checkin``).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._closed = False
        # A SQLite file's primary-key reads run inline on the caller's thread (see get_run).
        self._inline: SqliteReads | None = None
        self._inline_open = engine.dialect.name == "sqlite"
        # Fleet runs this process executes: run id → the executor it executes them as, and those
        # it has lost to a takeover (docs/fleet.md "Fencing"; :meth:`fence`).
        self._fences: dict[str, str] = {}
        self._lost: set[str] = set()
        event.listen(engine, "checkin", self._close_late_checkin)

    @classmethod
    def open(cls, url: str) -> Store:
        """Connect to ``url`` and migrate the database to the newest revision (blocks)."""
        with map_storage_errors():
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

    async def reachable(self) -> bool:
        """Whether the database answers a ``SELECT 1`` (a storage error of any kind: no)."""

        def ping() -> None:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))

        try:
            await in_thread(ping)
        except StorageError:
            return False
        return True

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._inline is not None:
                self._inline.close()
                self._inline = None
            self.engine.dispose()

    def _close_late_checkin(self, _dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        # A pool's checkin event, in the thread handing the connection back: after close() the
        # engine's pools are unowned, and a connection left in one is never closed (psycopg warns
        # "deleted while still open" when it is collected).
        if self._closed:
            record.close()

    # Tasks.

    async def create_task(
        self,
        prompt: str,
        *,
        repo: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        task_id: str | None = None,
        owner: str | None = None,
    ) -> TaskRecord:
        """Insert a task; ``task_id`` defaults to a new sortable ``task_…`` id; ``owner`` is who may see it."""
        values: dict[str, Any] = {
            "id": task_id or new_task_id(),
            "prompt": prompt,
            "repo": repo,
            "title": title,
            "metadata": dict(metadata or {}),
            "created_at": utc_timestamp(),
            "owner": owner,
        }
        return await in_thread(_create_task, self.engine, values)

    async def get_task(self, task_id: str) -> TaskRecord:
        """The task, or ``NotFoundError("task_not_found")``."""
        return await in_thread(_rundata.get_task, self.engine, task_id)

    # Hand-off (baton.runs.handoff): every row of one run, out and back in (baton.store.transfer).

    def reading_run_rows(self, run_id: str, *, page: int = transfer.PAGE) -> AbstractContextManager[RunReader | None]:
        """Blocking (call it in a worker thread): a reader of the run's rows in pages, in one read
        transaction, or None when the store has no such run."""
        return transfer.reading_run_rows(self.engine, run_id, page=page)

    async def insert_run_rows(self, head: RunHead, pages: Iterable[tuple[str, Page]]) -> int:
        """Write an exported run whole, in one transaction (``run_exists`` when its id is taken);
        the number of rows written besides the run's and its task's. ``pages`` is iterated in
        the worker thread."""
        return await in_thread(transfer.insert_run_rows, self.engine, head, pages)

    async def delete_run_rows(self, run_id: str) -> None:
        """Remove every row of an imported run again (not its task); nothing when it is not there."""
        await in_thread(transfer.delete_run_rows, self.engine, run_id)

    # Gates (the rules of deciding are baton.gates.ledger's; these read and write rows).

    async def open_gate(
        self, run_id: str, values: dict[str, Any], *, keep: tuple[str, ...] = ()
    ) -> tuple[GateRecord, list[GateRecord]]:
        """Insert a pending gate; the run's pending gates of its kind bound to another input, but
        for those in ``keep``, are superseded in the same transaction (returned second)."""
        return await in_thread(_gates.open_gate, self.engine, run_id, values, keep)

    async def get_gate(self, gate_id: str) -> GateRecord:
        """The gate, or ``gate_not_found``."""
        return await in_thread(_gates.get_gate, self.engine, gate_id)

    async def list_gates(
        self, *, run_id: str | None = None, status: str | None = None, owner: str | None = None
    ) -> list[GateRecord]:
        """Gates oldest first, by run (``run_not_found``), status and the owner of their run."""
        return await in_thread(_gates.list_gates, self.engine, run_id, status, owner)

    async def run_summaries(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Each run's ``{pending_gates, input_tokens, output_tokens}`` (``GET /v1/runs?summary=true``)."""
        return await in_thread(_summaries.run_summaries, self.engine, list(run_ids))

    async def run_agent(self, run_id: str) -> str:
        """The agent a run was recorded with (``run_not_found``)."""
        return await in_thread(_gates.run_agent, self.engine, run_id)

    async def decide_gate(
        self, gate: GateRecord, status: str, decision: dict[str, Any], decided_by: str
    ) -> GateRecord | None:
        """The decision and the inbox command that wakes the run, in one transaction; None when
        the gate is no longer pending (an overdue gate is expired first)."""
        return await in_thread(_gates.decide, self.engine, gate, status, decision, decided_by)

    async def expire_due_gates(self, run_id: str | None, now: str) -> list[GateRecord]:
        """Expire every pending gate past its deadline (and wake its run); the gates expired."""
        return await in_thread(_gates.expire_due, self.engine, run_id, now)

    async def deny_pending_gates(self, run_id: str, decision: dict[str, Any], decided_by: str) -> list[GateRecord]:
        """Deny every pending gate of the run (and wake it), in one transaction; the gates denied."""
        return await in_thread(_gates.deny_all, self.engine, run_id, decision, decided_by)

    async def mark_gate_used(self, gate_id: str, call_id: str) -> None:
        """Record on an approved gate the call that ran on it (``gate_not_pending`` if another did)."""
        await in_thread(_gates.mark_used, self.engine, gate_id, call_id)

    # Runs.

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
        budget_turns: int | None = None,
        budget_seconds: float | None = None,
        owner: str | None = None,
        resumed_from: str | None = None,
        run_id: str | None = None,
        request: Mapping[str, Any] | None = None,
        executor_id: str | None = None,
        exclusive: Holds | None = None,
    ) -> RunRecord:
        """Insert a ``queued`` run; ``run_id`` defaults to a new sortable id.

        ``request`` is what the run was asked to do beyond the other fields (its prompt …): a
        queued run whose process died is started from it (docs/runs.md "Workers").
        ``executor_id`` is the process that will execute it. With ``exclusive`` the run is
        recorded only while no other run in its workspace (``repo``, else ``cwd``) holds it
        (``exclusive(record)``), else ``RefusedError("workspace_busy")`` — atomically: of two
        processes racing for one workspace exactly one records its run.
        """
        if run_mode not in RUN_MODES:
            raise UsageError("invalid_argument", f"run_mode must be one of {sorted(RUN_MODES)}")
        created_at = utc_timestamp()
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
            "budget_turns": budget_turns,
            "budget_seconds": budget_seconds,
            "owner": owner,
            "resumed_from": resumed_from,
            "created_at": created_at,
            "request": None if request is None else dict(request),
            "executor_id": executor_id,
            # Its first heartbeat: an executor on another host is judged alive by it from the start.
            "heartbeat_at": created_at if executor_id else None,
        }
        return await in_thread(self._create_run, values, exclusive)

    async def claim_run(
        self, run_id: str, *, expected_executor: str | None, executor_id: str | None, exclusive: Holds | None = None
    ) -> bool:
        """Make ``executor_id`` the run's executor if it still is ``expected_executor`` (compare-and-set:
        of two processes taking over one run, one wins); False when another took it first.
        ``executor_id`` None releases a dead executor's run (a fleet takeover, docs/fleet.md).

        With ``exclusive``, refused with ``workspace_busy`` while another run holds the run's
        workspace, in the same transaction (as :meth:`create_run`).
        """
        return await in_thread(self._claim_run, run_id, expected_executor, executor_id, exclusive)

    async def live_executor_keys(self) -> set[int]:
        """The lock keys of the executors alive now (Postgres: baton.store.liveness)."""
        from baton.store.liveness import live_executor_keys

        return await in_thread(live_executor_keys, self.engine)

    async def release_dead_run(self, run_id: str, executor_id: str) -> bool:
        """Release the run from ``executor_id`` if that is still its executor and its lock is not
        held, atomically (Postgres; baton.store.liveness.release_if_dead): False otherwise."""
        from baton.store.liveness import release_if_dead

        return await in_thread(release_if_dead, self.engine, run_id, executor_id)

    async def offered_queue_keys(self) -> set[int]:
        """The lock keys of the fleet queues live workers serve now (Postgres: baton.store.queue_offers)."""
        from baton.store.queue_offers import offered_queue_keys

        return await in_thread(offered_queue_keys, self.engine)

    async def get_run(self, run_id: str) -> RunRecord:
        """The run, or ``NotFoundError("run_not_found")``.

        On a SQLite file the read runs inline, without a worker thread: a primary-key read of a
        WAL database is ~0.1 ms and never waits for a writer, a thread hop costs more than the
        read (the server's hottest request, ``GET /v1/runs/{id}``). A read that finds the
        database locked after all (another process switching the journal mode) goes to a thread
        and waits there; Postgres reads always do.
        """
        inline = self._inline_reads()
        if inline is not None:
            try:
                with map_storage_errors():
                    return inline.run_now(run_id)
            except StorageError as exc:
                if exc.code != "storage_busy":
                    raise
        return await in_thread(self._get_run, run_id)

    def _inline_reads(self) -> SqliteReads | None:
        if self._inline is None and self._inline_open and not self._closed:
            self._inline_open = False  # tried once: a store that is no SQLite file reads through threads
            self._inline = SqliteReads.open(self.engine.url.render_as_string(hide_password=False), busy_timeout=0)
        return self._inline

    async def list_runs(self, status: str | tuple[str, ...] | None = None) -> list[RunRecord]:
        """Runs in creation order, optionally only those with ``status`` (or any of several)."""
        return await in_thread(self._list_runs, status)

    def fence(self, run_id: str, executor_id: str) -> None:
        """From now on :meth:`update_run` changes the run only while ``executor_id`` is its
        executor, checked under the row's lock (``run_taken_over`` otherwise): a worker that lost
        its liveness lock never overwrites a run another executor took over."""
        self._fences[run_id] = executor_id
        self._lost.discard(run_id)

    def lose(self, run_id: str) -> None:
        """This process no longer executes the run: every :meth:`update_run` of it is refused
        (``run_taken_over``) without asking the database, until it is fenced again."""
        self._lost.add(run_id)

    def unfence(self, run_id: str) -> None:
        self._fences.pop(run_id, None)
        self._lost.discard(run_id)

    async def update_run(self, run_id: str, **fields: Any) -> RunRecord:
        """Change a run's fields (see ``UPDATABLE_FIELDS``) and return the new record.

        A new ``status`` is recorded as a transition, with ``status_reason`` as its reason.
        Moving to ``running`` stamps ``started_at`` and moving to a terminal status stamps
        ``finished_at``, unless given or already set.
        """
        unknown = set(fields) - UPDATABLE_FIELDS
        if unknown:
            raise UsageError("invalid_argument", f"cannot update run fields {sorted(unknown)}")
        status = fields.get("status")
        if status is not None and status not in RUN_STATUSES:
            raise UsageError("invalid_argument", f"unknown run status {status!r}")
        if run_id in self._lost:
            raise _taken_over(run_id)
        return await in_thread(self._update_run, run_id, fields)

    async def with_locked_run(
        self, run_id: str, work: Callable[[LockedRun], T], *, redactor: Redactor | None = None
    ) -> T:
        """``work(locked)`` in one transaction holding the run's row lock (``run_not_found``):
        it reads the run, changes it (``locked.update``) and appends to its log (``locked.append``,
        numbered after the last committed entry), and all of it commits together or not at all.

        Only for a run no live process executes: its entries are numbered here, not by a
        :class:`~baton.store.log.SessionLog`. ``work`` runs in a worker thread and must not block
        on anything but the database.
        """
        return await in_thread(self._with_locked_run, run_id, work, redactor)

    async def list_transitions(self, run_id: str) -> list[Transition]:
        """Every status the run moved into, oldest first (its creation as ``queued`` included)."""
        return await in_thread(self._list_transitions, run_id)

    async def log_position(self, run_id: str) -> int:
        """The seq of the run's last committed log entry (0 for an empty log), or ``run_not_found``."""
        _run_key, last = await in_thread(run_position, self.engine, run_id)
        return last

    # Runner events.

    async def save_runner_events(self, run_id: str, events: Iterable[Mapping[str, Any]]) -> None:
        """Store runner events (``seq, log_seq, ts, type, data`` of each); a stored seq is kept."""
        await in_thread(_rundata.save_runner_events, self.engine, run_id, list(events))

    async def read_runner_events(self, run_id: str, after: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Stored runner events with ``seq > after`` in seq order (without ``raw``)."""
        return await in_thread(_rundata.read_runner_events, self.engine, run_id, after, limit)

    # The inbox.

    async def inbox_put(self, run_id: str, kind: str, payload: Mapping[str, Any]) -> int:
        """Queue a command for the run's executor; returns its id (on Postgres, also NOTIFY)."""
        return await in_thread(_rundata.inbox_put, self.engine, run_id, kind, payload)

    async def inbox_take(self, run_id: str, taken_by: str) -> list[dict[str, Any]]:
        """Mark every untaken command of the run taken by ``taken_by`` and return them in order.

        Each command is returned to exactly one caller, however many take at once.
        """
        return await in_thread(_rundata.inbox_take, self.engine, run_id, taken_by)

    async def inbox_pending(self, run_id: str) -> list[dict[str, Any]]:
        """The run's untaken commands in order, without taking them."""
        return await in_thread(_rundata.inbox_pending, self.engine, run_id)

    # Conversation state.

    async def save_conversation_state(self, run_id: str, upto_seq: int, state: Mapping[str, Any]) -> None:
        """Replace the run's stored conversation state, folded from its log up to ``upto_seq``."""
        await in_thread(_rundata.save_conversation_state, self.engine, run_id, upto_seq, state)

    async def load_conversation_state(self, run_id: str) -> tuple[int, dict[str, Any]] | None:
        """``(upto_seq, state)`` as last saved, or None."""
        return await in_thread(_rundata.load_conversation_state, self.engine, run_id)

    # Snapshots.

    async def add_snapshot(self, run_id: str, snapshot: Mapping[str, Any]) -> None:
        """Store a snapshot (``id`` ``s1``, ``s2`` …, ``tree_hash`` required); a stored id is kept."""
        await in_thread(_rundata.add_snapshot, self.engine, run_id, snapshot)

    async def list_snapshots(self, run_id: str) -> list[dict[str, Any]]:
        """The run's snapshots in id order (s1, s2, … s10)."""
        return await in_thread(_rundata.list_snapshots, self.engine, run_id)

    async def get_snapshot(self, run_id: str, snapshot_id: str) -> dict[str, Any]:
        """One snapshot, or ``NotFoundError("snapshot_not_found")``."""
        return await in_thread(_rundata.get_snapshot, self.engine, run_id, snapshot_id)

    # Blocking halves.

    def _create_run(self, values: Mapping[str, Any], exclusive: Holds | None) -> RunRecord:
        try:
            with self.engine.begin() as connection:
                workspace = values["repo"] or values["cwd"]
                if exclusive is not None and workspace:
                    lock_workspace(connection, workspace)
                    if holders := holding_runs(connection, workspace, exclusive, except_run=None):
                        raise busy_error(holders[0], workspace)
                run_key = connection.execute(insert(runs).values(**values).returning(runs.c.run_key)).scalar_one()
                connection.execute(
                    insert(run_transitions).values(
                        run_key=run_key, from_status=None, to_status="queued", reason=None, at=values["created_at"]
                    )
                )
                row = connection.execute(select(*_RECORD_COLUMNS).where(runs.c.run_key == run_key)).one()
        except IntegrityError as exc:
            raise UsageError("invalid_argument", f"cannot create run {values['id']}: {exc.orig}") from exc
        return _record(row)

    def _claim_run(self, run_id: str, expected: str | None, executor_id: str | None, exclusive: Holds | None) -> bool:
        with self.engine.begin() as connection:
            found = connection.execute(select(runs.c.repo, runs.c.cwd).where(runs.c.id == run_id)).one_or_none()
            if found is None:
                raise NotFoundError("run_not_found", f"no run {run_id}")
            workspace = found.repo or found.cwd
            if exclusive is not None and workspace:
                lock_workspace(connection, workspace)
                if holders := holding_runs(connection, workspace, exclusive, except_run=run_id):
                    raise busy_error(holders[0], workspace)
            current = runs.c.executor_id.is_(None) if expected is None else runs.c.executor_id == expected
            claimed = connection.execute(
                update(runs).where(runs.c.id == run_id, current).values(executor_id=executor_id)
            )
            return claimed.rowcount == 1

    def _get_run(self, run_id: str) -> RunRecord:
        with self.engine.connect().execution_options(**READ_ONLY) as connection:
            row = connection.execute(_RUN_BY_ID, {"run_id": run_id}).one_or_none()
        if row is None:
            raise NotFoundError("run_not_found", f"no run {run_id}")
        return _record(row)

    def _list_runs(self, status: str | tuple[str, ...] | None) -> list[RunRecord]:
        query = select(*_RECORD_COLUMNS).order_by(runs.c.run_key)
        if isinstance(status, tuple):
            query = query.where(runs.c.status.in_(status))
        elif status is not None:
            query = query.where(runs.c.status == status)
        with self.engine.connect().execution_options(**READ_ONLY) as connection:
            return [_record(row) for row in connection.execute(query)]

    def _update_run(self, run_id: str, fields: dict[str, Any]) -> RunRecord:
        fenced = self._fences.get(run_id)
        with self.engine.begin() as connection:
            found = lock_run(connection, run_id)
            if fenced is not None and found.executor_id != fenced:
                raise _taken_over(run_id, found.executor_id)
            return update_locked_run(connection, found, fields)

    def _with_locked_run(self, run_id: str, work: Callable[[LockedRun], T], redactor: Redactor | None) -> T:
        with self.engine.begin() as connection:
            locked = LockedRun(connection, lock_run(connection, run_id), redactor or Redactor())
            result = work(locked)
            locked.write_entries()
        return result

    def _list_transitions(self, run_id: str) -> list[Transition]:
        columns = run_transitions.c
        with self.engine.connect().execution_options(**READ_ONLY) as connection:
            run_key = _rundata.run_key_of(connection, run_id)
            rows = connection.execute(
                select(columns.from_status, columns.to_status, columns.reason, columns.at)
                .where(columns.run_key == run_key)
                .order_by(columns.id)
            ).all()
        return [Transition(**row._asdict()) for row in rows]


_record = run_record


def _taken_over(run_id: str, executor_id: str | None = None) -> RefusedError:
    now = f"executor {executor_id}" if executor_id else "no executor (released to be taken over)"
    return RefusedError("run_taken_over", f"run {run_id} is no longer executed here: it has {now}")


def _create_task(engine: Engine, values: dict[str, Any]) -> TaskRecord:
    try:
        return _rundata.create_task(engine, values)
    except IntegrityError as exc:
        raise UsageError("invalid_argument", f"cannot create task {values['id']}: {exc.orig}") from exc
