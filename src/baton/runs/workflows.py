"""Runs as DBOS workflows (docs/design.md "Runs across processes"; docs/runs.md "Workflows").

Every execution of a run in a process is one DBOS workflow, ``<run_id>:<attempt>``:

- step ``baton_execute`` drives the run until it ends or parks. Its body is the
  :class:`~baton.runs.executor.RunExecution` the process prepared (``Baton.start`` or
  ``Baton.resume``); when there is none — the workflow continues a parked run — it prepares
  one through :mod:`baton.runs.resume`, which is idempotent: whatever the log holds, the run
  continues from it.
- an outcome ``paused`` (a human gate parked the run: the agent stopped, no executor holds
  it) ends the attempt; the durable wait is the gates ledger (:mod:`baton.runs.parking`), and
  whoever continues the run once its gates are decided starts a new attempt.

Steps are coarse (a whole execution, never an event): each DBOS operation costs ~4 ms of CPU.

Only processes that execute runs launch DBOS (:func:`acquire`), each with its own executor id
(:func:`~baton.runs.executors.this_executor_id`: pid and start time, so no other process ever
has it, and DBOS's launch-time recovery of "its own" pending workflows finds none). Every run
this process executes starts its workflow at once (``DBOS.start_workflow_async``: in this
process, on this loop), and the workflow waits for one of the process's ``BATON_CONCURRENCY``
slots before its step: a burst waits ``queued``, with no poll (a DBOS queue is polled, ~3 ms
of CPU a poll: 5-7 % of a core idle at the 50 ms a prompt start needs). A run is executed by
the process that took it over (a compare-and-set on ``runs.executor_id``), never by another.
Taking over a dead executor's run starts a new attempt and cancels the dead attempt's
workflow, so nothing recovers it behind baton's back.

DBOS's own background loops are slowed where baton uses nothing they serve (:func:`_quiet`):
its internal queue (scheduled workflows, Kafka, ``resume_workflow``) and its background jobs
(delayed workflows, workflow timeouts) run every ``DBOS_IDLE_POLL_SECONDS``, its scheduler
every 30 s from the start.

DBOS's system database is its own SQLite file under ``BATON_HOME`` (``dbos.sqlite``, WAL) —
sharing baton's file stalled for seconds when measured — or, on Postgres, the same database as
baton's tables (schema ``dbos``, or ``dbos_<schema>`` for a store in a schema of its own).

The fleet (baton.runs.fleet, docs/fleet.md): a runtime made with ``fleet=True`` (``baton
worker`` on Postgres) listens on DBOS's queue ``baton-fleet`` and executes what it dequeues —
workflow ``baton_fleet_run``, whose step prepares the execution from the store here
(:meth:`DurableRuntime.execute_dequeued`) — and holds its executor's advisory lock. Any
runtime on Postgres can enqueue there (:meth:`DurableRuntime.enqueue_fleet`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, Final

from dbos import DBOS, DBOSConfig, SetWorkflowID

from baton.config import Settings
from baton.errors import BatonError
from baton.events.entry import utc_timestamp
from baton.runs.dbos_internals import quiet, workflows_active
from baton.runs.executors import this_executor_id
from baton.runs.fleet import (
    DEFAULT_PRIORITY,
    FLEET_QUEUE,
    dbos_schema,
    enqueue_options,
    queue_limits,
    served_queues,
)
from baton.runs.lifecycle import cancel_not_started
from baton.runs.spec import RunOutcome
from baton.store import Store
from baton.store.liveness import ExecutorLock
from baton.store.queue_offers import QueueOffer

__all__ = [
    "APPLICATION_VERSION",
    "APP_NAME",
    "HEARTBEAT_SECONDS",
    "DurableRuntime",
    "acquire",
    "current",
    "release",
    "system_database_url",
]

APP_NAME: Final = "baton"
# Bumped only when the workflow's step structure changes: a parked run started by an older
# baton must still be recoverable after an upgrade (DBOS's default hashes the source).
APPLICATION_VERSION: Final = "baton-run-1"
HEARTBEAT_SECONDS: Final = 30.0  # runs.heartbeat_at is refreshed this often (remote executors' liveness)
# DBOS's notification listener sleeps this long between polls and DBOS.destroy() joins it: at
# DBOS's default (1 s) every executing process took up to a second more to shut down. baton
# waits on no DBOS notification, so a poll is a look at two empty maps.
NOTIFICATION_POLL_SECONDS: Final = 0.05
# DBOS's internal queue and its background jobs (at 1 s each by default) serve nothing baton uses.
DBOS_IDLE_POLL_SECONDS: Final = 30.0

Execute = Callable[[], Awaitable[RunOutcome]]
Adopt = Callable[[str], Awaitable[Execute]]

_active: DurableRuntime | None = None
_users = 0


def system_database_url(settings: Settings) -> str:
    """DBOS's system database: its own SQLite file under BATON_HOME, or baton's Postgres database."""
    url = settings.resolved_database_url
    if url.startswith(("postgresql", "postgres")):
        return url
    return f"sqlite:///{settings.home / 'dbos.sqlite'}"


def _outcome_data(outcome: RunOutcome) -> dict[str, Any]:
    return asdict(outcome)


def _outcome(data: dict[str, Any]) -> RunOutcome:
    return RunOutcome(**data)


@DBOS.step(name="baton_execute")
async def _execute_step(run_id: str) -> dict[str, Any]:
    """Drive the run in this process until it ends or parks."""
    return _outcome_data(await current().execute(run_id))


@DBOS.step(name="baton_fleet_execute")
async def _fleet_step(run_id: str) -> dict[str, Any]:
    """Prepare the dequeued run from the store on this worker and drive it until it ends or parks."""
    return _outcome_data(await current().execute_dequeued(run_id))


@DBOS.workflow(name="baton_fleet_run")
async def _fleet_workflow(run_id: str) -> dict[str, Any]:
    """One attempt of a fleet run, dequeued from ``baton-fleet`` within the queue's limits."""
    return await _fleet_step(run_id)


@DBOS.workflow(name="baton_run")
async def _run_workflow(run_id: str) -> dict[str, Any]:
    """start → turns → finish, or park: a parked run is only its rows (baton.runs.parking), and
    whoever continues it once its gates are decided — ``baton run`` waiting through the park,
    ``baton resume``, a worker adopting it — does so in a new attempt.

    It first waits ``queued`` for a slot of this process (no DBOS operation: the step structure
    is unchanged); a run dropped meanwhile (cancelled, its ``Baton`` closing) never starts."""
    runtime = current()
    if not await runtime.slots.take(run_id):
        return _outcome_data(RunOutcome(run_id, "cancelled", stop_reason="cancelled", message="not started"))
    try:
        return await _execute_step(run_id)
    finally:
        runtime.slots.release()


class Slots:
    """At most ``limit`` runs executing at once in this process; the others wait, in order.

    No polling: a waiter is a future, handed its slot by :meth:`release`, or ``False`` by
    :meth:`drop` (the run will not start).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._waiting: dict[str, asyncio.Future[bool]] = {}  # in arrival order

    async def take(self, key: str) -> bool:
        """Wait for a slot (True), or until ``key`` is dropped (False)."""
        if self.held < self.limit and not self._waiting:
            self.held += 1
            return True
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting[key] = waiter
        try:
            return await waiter
        except asyncio.CancelledError:
            if self._waiting.get(key) is waiter:
                del self._waiting[key]
            if waiter.done() and not waiter.cancelled() and waiter.result():
                self.release()  # handed a slot as the cancel arrived: hand it on
            raise

    def drop(self, key: str) -> None:
        """``key`` will not start: its wait ends with False."""
        waiter = self._waiting.pop(key, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(False)

    def drop_waiting(self) -> None:
        """Every waiter's wait ends with False."""
        for key in list(self._waiting):
            self.drop(key)

    def release(self) -> None:
        self.held -= 1
        while self._waiting and self.held < self.limit:
            key = next(iter(self._waiting))
            waiter = self._waiting.pop(key)
            if not waiter.done():
                self.held += 1
                waiter.set_result(True)


class DurableRuntime:
    """DBOS launched in this process: its queue, the runs it executes, their heartbeats."""

    def __init__(
        self,
        settings: Settings,
        concurrency: int,
        sys_db_url: str,
        *,
        durable: bool = True,
        fleet: bool = False,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.fleet = fleet  # listens on the fleet queue (baton worker on Postgres)
        self.labels = dict(labels or {})  # a worker's --labels: it serves the queue of each subset
        # The fleet runs executing here at once, across every queue this worker serves: DBOS's
        # per-worker limit holds per queue only (made in serve_fleet).
        self.fleet_slots: Slots | None = None
        self._offer: QueueOffer | None = None
        self.fleet_concurrency: int | None = None  # this worker's per-worker limit (None: the configured)
        # What prepares a dequeued fleet run here, and the store it lives in (Baton.join_fleet).
        self._fleet_prepare: Adopt | None = None
        # What puts a dequeued run that will not start here back on its queue (Baton.enqueue_again).
        self._fleet_give_back: Callable[[str], Awaitable[None]] | None = None
        self._fleet_store: Store | None = None
        self._lock: ExecutorLock | None = None
        self._fleet_ready = asyncio.Event()  # set once the lock is held and the preparer is known
        self._fleet_ids: set[str] = set()  # fleet runs dequeued here and not ended
        self._lost: set[str] = set()  # of those, the ones stopped by the lock watch (baton.runs.lock_watch)
        # False: DBOS already runs in this process on another BATON_HOME (DBOS is a process-wide
        # singleton; only tests and embedders open two homes at once). Runs then execute as plain
        # tasks under the same limit — still durable through their log and resume, not workflows.
        self.durable = durable
        self.slots = Slots(concurrency)
        self.concurrency = concurrency
        self.sys_db_url = sys_db_url
        self.executor_id = this_executor_id()
        # Per run: the store it lives in and what prepares an execution when the process holds none.
        self._stores: dict[str, Store] = {}
        self._adopters: dict[str, Adopt] = {}
        self._pending: dict[str, Execute] = {}
        self._results: dict[str, asyncio.Future[RunOutcome]] = {}
        self._tasks: dict[str, asyncio.Task[RunOutcome]] = {}
        self._workflows: dict[str, str] = {}  # run id → the workflow id of its current attempt
        self._heartbeat: asyncio.Task[None] | None = None
        self._local: set[asyncio.Task[None]] = set()

    # Launch and shutdown.

    def launch(self) -> None:
        """``DBOS.launch()`` — call from a coroutine on the running loop (async workflows run on it)."""
        self._heartbeat = asyncio.create_task(self._beat(), name="baton-heartbeat")
        if not self.durable:
            return
        if self.sys_db_url.startswith("sqlite:///"):
            _sqlite_wal(Path(self.sys_db_url.removeprefix("sqlite:///")))
        config: DBOSConfig = {
            "name": APP_NAME,
            "dbos_system_schema": dbos_schema(self.sys_db_url),
            "system_database_url": self.sys_db_url,
            "application_version": APPLICATION_VERSION,
            "executor_id": self.executor_id,
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": NOTIFICATION_POLL_SECONDS,
        }
        if self.sys_db_url.startswith("sqlite:"):
            config["sys_db_pool_size"] = 2
        dbos = DBOS(config=config)
        # No queue but the fleet's, and that one only on a fleet worker: other runs start their
        # workflows directly.
        DBOS.listen_queues(served_queues(self.labels) if self.fleet else [])
        quiet(dbos, DBOS_IDLE_POLL_SECONDS)
        DBOS.launch()

    async def register_fleet_queue(self, name: str = FLEET_QUEUE) -> None:
        """Declare a fleet queue with this configuration's limits (every fleet process does; the
        latest wins, so give them one ``[fleet]`` configuration)."""
        limits = queue_limits(self.settings, self.fleet_concurrency)
        await DBOS.register_queue_async(name, on_conflict="always_update", **limits)

    async def register_served_queues(self) -> None:
        """This worker's limits on every queue it serves: the unlabelled one, and each labelled
        one already declared (an API server declares a label set's queue with the run that
        first asks for it; declaring the others would poll queues nobody uses)."""
        await self.register_fleet_queue(FLEET_QUEUE)
        served = set(served_queues(self.labels)) - {FLEET_QUEUE}
        if served:
            for queue in await DBOS.list_queues_async():
                if queue.name in served:
                    await self.register_fleet_queue(queue.name)

    async def offer_queues(self) -> None:
        """Tell the fleet which queues this worker serves (baton.store.queue_offers): held until shutdown."""
        offer = QueueOffer(self.settings.resolved_database_url, served_queues(self.labels))
        await asyncio.to_thread(offer.acquire)
        self._offer = offer

    async def hold_lock(self) -> None:
        """Take this executor's advisory lock (baton.store.liveness): held until shutdown."""
        lock = ExecutorLock(self.settings.resolved_database_url, self.executor_id)
        await asyncio.to_thread(lock.acquire)
        self._lock = lock

    @property
    def lock(self) -> ExecutorLock | None:
        """This executor's advisory lock, once :meth:`hold_lock` took it."""
        return self._lock

    @property
    def fleet_runs(self) -> frozenset[str]:
        """The fleet runs executing here now (dequeued, prepared, started)."""
        return frozenset(run_id for run_id in self._fleet_ids if run_id in self._tasks)

    def hold_dequeues(self) -> None:
        """Runs dequeued from now on wait before they start (this worker's lock is in doubt)."""
        self._fleet_ready.clear()

    def resume_dequeues(self) -> None:
        if self._fleet_prepare is not None:
            self._fleet_ready.set()

    def lose(self, run_ids: frozenset[str]) -> None:
        """These fleet runs are no longer this worker's: one still being prepared never starts."""
        self._lost |= run_ids & self._fleet_ids

    def serve_fleet(self, store: Store, prepare: Adopt, give_back: Callable[[str], Awaitable[None]]) -> None:
        """What prepares the runs this worker dequeues, their store, and what puts one back on
        its queue (a run still waiting for a slot here when the worker stops)."""
        self._fleet_store = store
        self._fleet_prepare = prepare
        self._fleet_give_back = give_back
        self.fleet_slots = Slots(self.fleet_concurrency or self.settings.fleet_worker_concurrency)
        self._fleet_ready.set()

    async def enqueue_fleet(
        self,
        run_id: str,
        owner: str | None,
        *,
        labels: Mapping[str, str] | None = None,
        priority: int = DEFAULT_PRIORITY,
    ) -> str:
        """Enqueue the run's next attempt on its label set's queue at its priority (the first for
        a new run); earlier attempts still pending under another executor are cancelled. The
        workflow id."""
        earlier = await DBOS.list_workflows_async(workflow_id_prefix=f"{run_id}:", load_input=False, load_output=False)
        for status in earlier:
            if status.status in ("PENDING", "ENQUEUED"):
                await DBOS.cancel_workflow_async(status.workflow_id)
        numbers = [s.workflow_id.rsplit(":", 1)[1] for s in earlier]
        attempt = max((int(n) for n in numbers if n.isdigit()), default=0) + 1
        options = enqueue_options(self.settings, run_id, attempt, owner, labels=labels, priority=priority)
        handle = await DBOS.enqueue_workflow_with_options_async(options, run_id)  # type: ignore[arg-type]
        return str(handle.get_workflow_id())

    async def execute_dequeued(self, run_id: str) -> RunOutcome:
        """The fleet step's body: the execution prepared from the store here, driven to its end.

        Dequeued before this worker holds its lock and knows its preparer (DBOS dequeues from
        launch on), it waits for both."""
        await self._fleet_ready.wait()
        if self._fleet_prepare is None or self._fleet_store is None or self.fleet_slots is None:
            return RunOutcome(run_id, "failed", code="internal_error", message="this process takes no fleet runs")
        # Dequeued from one of several queues while runs of the others fill this worker: it waits here.
        if not await self.fleet_slots.take(run_id):  # this worker stops: another one takes it
            if self._fleet_give_back is not None:
                with contextlib.suppress(Exception):
                    await self._fleet_give_back(run_id)
            return RunOutcome(run_id, "cancelled", stop_reason="cancelled", message="given back to the queue")
        try:
            return await self._execute_dequeued(run_id)
        finally:
            self.fleet_slots.release()

    async def _execute_dequeued(self, run_id: str) -> RunOutcome:
        assert self._fleet_prepare is not None and self._fleet_store is not None
        self._results[run_id] = asyncio.get_running_loop().create_future()
        self._stores[run_id] = self._fleet_store
        self._adopters[run_id] = self._fleet_prepare
        self._workflows[run_id] = DBOS.workflow_id or run_id
        self._fleet_ids.add(run_id)
        try:
            return await self.execute(run_id)
        finally:
            self._fleet_ids.discard(run_id)
            self._lost.discard(run_id)
            self._stores.pop(run_id, None)
            self._adopters.pop(run_id, None)
            self._workflows.pop(run_id, None)

    async def shutdown(self) -> None:
        """Stop what still executes here, let DBOS record it, and destroy DBOS."""
        await self.cancel_queued(frozenset(self._pending))
        if self.fleet_slots is not None:
            self.fleet_slots.drop_waiting()
        self.abort()
        for task in list(self._tasks.values()):
            with contextlib.suppress(BaseException):
                await task
        if self._lock is not None:
            await asyncio.to_thread(self._lock.release)
        if self._offer is not None:
            await asyncio.to_thread(self._offer.release)
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(BaseException):
                await self._heartbeat
        for local in list(self._local):
            with contextlib.suppress(BaseException):
                await local
        if not self.durable:
            return
        # The workflows record their ends on DBOS's thread pool: give them a moment.
        for _ in range(200):
            if not workflows_active():
                break
            await asyncio.sleep(0.01)
        for future in self._results.values():
            if not future.done():
                future.cancel()
        DBOS.destroy(workflow_completion_timeout_sec=0)
        # DBOS made its thread pool the loop's default executor and has shut it down: let the
        # loop make a new one, or every later asyncio.to_thread on this loop fails.
        loop = asyncio.get_running_loop()
        if getattr(loop, "_default_executor", None) is not None:
            loop._default_executor = None  # type: ignore[attr-defined]

    # Runs.

    @property
    def executing(self) -> frozenset[str]:
        """Runs queued or executing in this process."""
        return frozenset(run_id for run_id, future in self._results.items() if not future.done())

    @property
    def running(self) -> int:
        """How many runs execute here now (the queue's limit counts these)."""
        return sum(1 for task in self._tasks.values() if not task.done())

    def store_of(self, run_id: str) -> Store:
        return self._stores[run_id]

    async def wait_idle(self) -> None:
        """Until no run is queued or executing here."""
        while pending := [future for future in self._results.values() if not future.done()]:
            await asyncio.wait(pending)

    async def submit(
        self, run_id: str, execute: Execute, *, store: Store, adopt: Adopt, attempt: int = 1
    ) -> asyncio.Future[RunOutcome]:
        """Queue the run's execution as a new workflow attempt; the future resolves with its outcome."""
        future: asyncio.Future[RunOutcome] = asyncio.get_running_loop().create_future()
        self._pending[run_id] = execute
        self._results[run_id] = future
        self._stores[run_id] = store
        self._adopters[run_id] = adopt
        await store.update_run(run_id, executor_id=self.executor_id, heartbeat_at=utc_timestamp())
        workflow_id = f"{run_id}:{attempt}"
        self._workflows[run_id] = workflow_id
        if not self.durable:
            self._local.add(asyncio.create_task(self._execute_locally(run_id), name=f"baton-local-{run_id}"))
            return future
        with SetWorkflowID(workflow_id):
            await DBOS.start_workflow_async(_run_workflow, run_id)
        return future

    async def _execute_locally(self, run_id: str) -> None:
        if not await self.slots.take(run_id):
            return
        try:
            if run_id in self._pending:
                await self.execute(run_id)
        finally:
            self.slots.release()

    async def next_attempt(self, run_id: str) -> int:
        """The attempt number of a run taken over; earlier attempts left by dead executors are cancelled."""
        if not self.durable:
            return 1
        earlier = await DBOS.list_workflows_async(workflow_id_prefix=f"{run_id}:", load_input=False, load_output=False)
        for status in earlier:
            if status.status in ("PENDING", "ENQUEUED") and status.executor_id != self.executor_id:
                # Its executor is dead (the run was claimed from it): nothing must recover it.
                await DBOS.cancel_workflow_async(status.workflow_id)
        attempts = [int(s.workflow_id.rsplit(":", 1)[1]) for s in earlier if s.workflow_id.rsplit(":", 1)[1].isdigit()]
        return max(attempts, default=0) + 1

    async def execute(self, run_id: str) -> RunOutcome:
        """The step's body: the prepared execution, or one prepared now (a workflow continuing a parked run)."""
        execute = self._pending.pop(run_id, None)
        try:
            if execute is None:
                execute = await self._adopters[run_id](run_id)
        except BatonError as exc:
            outcome = RunOutcome(run_id, "failed", code=exc.code, message=exc.message)
            self._resolve(run_id, outcome)
            return outcome
        if run_id in self._fleet_ids:
            await self._fleet_ready.wait()  # not while this worker's lock is in doubt
            if run_id in self._lost:
                message = "this worker lost its liveness lock while the run was prepared"
                outcome = RunOutcome(run_id, "failed", code="run_taken_over", message=message)
                self._resolve(run_id, outcome)
                return outcome
        await self._stores[run_id].update_run(run_id, heartbeat_at=utc_timestamp())
        task = asyncio.ensure_future(execute())
        self._tasks[run_id] = task
        await asyncio.wait({task})
        self._tasks.pop(run_id, None)
        if task.cancelled():  # this process is closing: the execution recorded the run as cancelled
            outcome = RunOutcome(run_id, "cancelled", stop_reason="cancelled", message="the run was interrupted")
        else:
            outcome = task.result()
        self._resolve(run_id, outcome)
        return outcome

    def abort(self, run_ids: frozenset[str] | None = None) -> None:
        """Cancel executions here (the runs end ``cancelled``) and drop runs still queued."""
        for run_id, task in list(self._tasks.items()):
            if run_ids is None or run_id in run_ids:
                task.cancel()
        for run_id in list(self._pending):
            if run_ids is None or run_id in run_ids:
                self._pending.pop(run_id)
                self.slots.drop(run_id)
                future = self._results.get(run_id)
                if future is not None and not future.done():
                    future.cancel()

    async def cancel_queued(self, run_ids: frozenset[str]) -> None:
        """Runs of ``run_ids`` still waiting for a slot never start: ``cancelled`` (``not_started``)."""
        for run_id in [queued for queued in self._pending if queued in run_ids]:
            self._pending.pop(run_id, None)
            self.slots.drop(run_id)
            future = self._results.get(run_id)
            if future is not None and not future.done():
                future.cancel()
            with contextlib.suppress(Exception):
                await cancel_not_started(self._stores[run_id], run_id)
            if self.durable:
                with contextlib.suppress(Exception):
                    await DBOS.cancel_workflow_async(self._workflows[run_id])

    def _resolve(self, run_id: str, outcome: RunOutcome) -> None:
        future = self._results.get(run_id)
        if future is not None and not future.done():
            future.set_result(outcome)

    async def _beat(self) -> None:
        """Keep ``heartbeat_at`` fresh on the runs executing or queued here (how a remote executor is
        judged alive: a queued run with a stale heartbeat would be started by a worker elsewhere)."""
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            for run_id in sorted(self.executing):
                with contextlib.suppress(Exception):
                    await self._stores[run_id].update_run(run_id, heartbeat_at=utc_timestamp())


def _sqlite_wal(path: Path) -> None:
    """DBOS leaves its SQLite file in rollback-journal mode; baton switches it to WAL before launch."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, timeout=30)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
    finally:
        connection.close()


def current() -> DurableRuntime:
    """The runtime launched in this process."""
    if _active is None:
        raise RuntimeError("DBOS is not launched in this process")
    return _active


async def acquire(
    settings: Settings, concurrency: int, *, fleet: bool = False, labels: Mapping[str, str] | None = None
) -> DurableRuntime:
    """DBOS for this process, launched on first use (one per process: DBOS is a singleton);
    ``fleet``: listening on the fleet queues its ``labels`` serve (a worker: only the first user decides)."""
    global _active, _users
    url = system_database_url(settings)  # nothing below awaits: two callers cannot both launch
    if _active is not None:
        if _active.sys_db_url != url:
            local = DurableRuntime(settings, concurrency, url, durable=False)
            local.launch()
            return local
        _users += 1
        return _active
    runtime = DurableRuntime(settings, concurrency, url, fleet=fleet, labels=labels)
    _log_dbos_to_stderr()
    runtime.launch()
    _active, _users = runtime, 1
    return runtime


async def release(runtime: DurableRuntime) -> None:
    """Let go of DBOS; the last user shuts it down."""
    global _active, _users
    if runtime is not _active:
        if not runtime.durable:
            await runtime.shutdown()
        return
    _users -= 1
    if _users > 0:
        return
    try:
        await runtime.shutdown()
    finally:
        _active = None


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A console handler that writes to whatever ``sys.stderr`` is *now*.

    DBOS's own handler keeps the ``sys.stderr`` of the moment it was made; when that was a
    replaced, since-closed stream (a CLI invoked in-process, a test's capture), every later
    ``DBOS(config=…)`` failed flushing it ("I/O operation on closed file").
    """

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:  # StreamHandler.__init__ assigns it; the property ignores it
        pass


def _log_dbos_to_stderr() -> None:
    """DBOS's logger at WARNING through :class:`_CurrentStderr`, in place of DBOS's console handler
    (DBOS adds its own only when the logger has none, under this name)."""
    logger = logging.getLogger("dbos")
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    for handler in list(logger.handlers):
        if handler.name == "__dbos_console_log_handler__" and not isinstance(handler, _CurrentStderr):
            logger.removeHandler(handler)
    if not any(isinstance(handler, _CurrentStderr) for handler in logger.handlers):
        handler = _CurrentStderr()
        handler.name = "__dbos_console_log_handler__"
        handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)8s] (%(name)s) %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)
