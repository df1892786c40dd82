"""``Baton``: the Python API the CLI, the server and ``baton acp`` are thin layers on.

``Baton`` keeps the lifecycle (open the store and the log, close them with the runs it
executes) and the orchestration: it builds a run's execution (:mod:`baton.runs.preparing`, which
launches agents through :mod:`baton.runs.launching`) and submits it to this process's durable
runtime (:mod:`baton.runs.workflows`). Reads go through :class:`~baton.runs.queries.Runs`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from baton.acp.host import AskHuman
from baton.config import Settings
from baton.events.entry import LogEntry
from baton.events.project import Projector, RunnerEvent
from baton.gates.handles import Gate, local_user
from baton.gates.ledger import GateLedger, GateRecord
from baton.runs.cancelling import cancel_run, end_parked
from baton.runs.executor import RunExecution
from baton.runs.executors import this_executor_id
from baton.runs.fleet import (
    NO_LABELLED_WORKER,
    NO_WORKER,
    WAITING,
    fleet_request,
    queue_name,
    require_postgres,
    run_labels,
    run_priority,
    waiting_reason,
)
from baton.runs.handle import RunHandle
from baton.runs.handoff import ExportResult, ImportResult
from baton.runs.inbox import post_command
from baton.runs.launching import Launcher, agent_entry
from baton.runs.parking import wake_local
from baton.runs.preparing import Preparer
from baton.runs.queries import Runs
from baton.runs.resume import run_keeping_conversation
from baton.runs.spec import RunOutcome, RunSpec
from baton.store import Redactor, RunRecord, SessionLog, Store

if TYPE_CHECKING:
    from baton.observability import Telemetry
    from baton.runs.workflows import DurableRuntime

__all__ = ["Baton", "RunHandle", "agent_entry"]


_log = logging.getLogger("baton.observability")


def _start_telemetry(settings: Settings, redactor: Redactor, *, metrics: bool) -> Telemetry | None:
    """The process's telemetry, or None (nothing configured: the SDK is not even imported)."""
    from baton.observability.config import TelemetryConfig

    config = TelemetryConfig.load(os.environ, settings.home)
    if config.disabled or not (config.exporting or metrics):
        return None
    for value in config.headers.values():  # an exporter's credentials are secrets of baton's
        if len(value) >= 8:
            redactor.add(value)
    from baton.observability import Telemetry

    return Telemetry.start(config, prometheus=metrics)


class Baton:
    """Opens the store and the session log; starts runs and reads them back."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        concurrency: int | None = None,
        metrics: bool = False,
        fleet: bool = False,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings or Settings.load()
        self._fleet = fleet  # a fleet worker: DBOS listens on the fleet queue (docs/fleet.md)
        self._labels = dict(labels or {})  # such a worker's --labels (baton.runs.fleet.served_queues)
        self._fleet_queues_registered: set[str] = set()
        # Telemetry (docs/observability.md): the standard OTEL environment and baton.toml say what
        # to export; ``metrics`` keeps the Prometheus registry ``GET /metrics`` serves.
        self._metrics = metrics
        self.telemetry: Telemetry | None = None
        # How many runs execute in this process at once; more wait ``queued`` (docs/runs.md).
        self.concurrency = concurrency or self.settings.concurrency
        self._durable: DurableRuntime | None = None  # DBOS, launched when this Baton first executes a run
        self._store: Store | None = None
        self._log: SessionLog | None = None
        self._queries: Runs | None = None
        self._preparer: Preparer | None = None
        self.redactor = Redactor()
        self._launcher = Launcher(self.settings, self.redactor)  # with the scripted model servers of its runs
        self._runs: dict[str, RunHandle] = {}
        self._closed = False

    async def __aenter__(self) -> Baton:
        if self._closed or self._store is not None:
            raise RuntimeError("a Baton cannot be reopened")
        self.settings.home.mkdir(parents=True, exist_ok=True)
        self._store = Store.open(self.settings.resolved_database_url)
        self._log = SessionLog(self._store, self.redactor)
        self.telemetry = _start_telemetry(self.settings, self.redactor, metrics=self._metrics)
        if self.telemetry is not None:
            self._log.observe_commits(self.telemetry.committed)
        await self._log.__aenter__()
        self._queries = Runs.over(self._store, self._log, self.settings)
        self._preparer = Preparer(self.settings, self._store, self._log, self._launcher, telemetry=self.telemetry)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._durable is not None:  # runs still queued never start; executing ones end cancelled
            await self._durable.cancel_queued(frozenset(self._runs))
            self._durable.abort(frozenset(self._runs))
        for handle in self._runs.values():
            await handle.settled()
        if self._durable is not None:
            from baton.runs import workflows

            await workflows.release(self._durable)
        if self._log is not None:
            await self._log.aclose()
        if self.telemetry is not None:  # flushed within a second, whatever the collector does
            summary = await asyncio.to_thread(self.telemetry.shutdown, 1.0)
            if summary is not None:
                _log.warning("%s", summary)
        if self._store is not None:
            await self._store.aclose()
        await asyncio.to_thread(self._launcher.close)

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeError("use `async with Baton(...)` first")
        return self._store

    @property
    def log(self) -> SessionLog:
        if self._log is None:
            raise RuntimeError("use `async with Baton(...)` first")
        return self._log

    @property
    def queries(self) -> Runs:
        """Runs, logs, snapshots, gates and commands as every face reads them (:mod:`baton.runs.queries`)."""
        if self._queries is None:
            raise RuntimeError("use `async with Baton(...)` first")
        return self._queries

    @property
    def _prepare(self) -> Preparer:
        if self._preparer is None:
            raise RuntimeError("use `async with Baton(...)` first")
        return self._preparer

    def _executing(self) -> set[str]:
        """The runs whose execution in this process has not ended."""
        return {run_id for run_id, handle in self._runs.items() if handle.executing}

    async def start(self, spec: RunSpec, *, ask_human: AskHuman | None = None) -> RunHandle:
        """Check the request, record the run, and start executing it in this process.

        ``ask_human`` answers the permissions the policy says to ask about (``baton acp``).
        Refused with ``workspace_busy`` while another live run holds the repository — atomically
        with recording the run, so of two processes starting at once exactly one records its run.
        """
        return await self._execute(await self._prepare.start(spec, ask_human))

    async def run(self, spec: RunSpec) -> RunOutcome:
        """Start a run and wait for its end."""
        return await (await self.start(spec)).wait()

    async def resume(
        self,
        run_id: str,
        prompt: str | None = None,
        *,
        repo: Path | None = None,
        ask_human: AskHuman | None = None,
        scenario: str | None = None,
    ) -> RunHandle:
        """Continue a run whose executor is gone, in this process (docs/resume.md).

        Without ``prompt`` the agent gets the continuation prompt naming the interrupted calls;
        an ended run needs ``prompt`` and continues its conversation in a new run
        (``resumed_from``). Refused with ``run_active`` while another process executes it. The
        run's model comes from where it came from (a run on a scenario gets a scripted server
        here); ``scenario`` continues it on that scenario instead, from now on.
        """
        executing = self._executing()
        plan, execution = await self._prepare.resume(run_id, prompt, repo, ask_human, executing, scenario)
        new_run = plan is not None and plan.resumed_from is not None  # a new run continuing an ended one
        handle = await self._execute(execution, taken_over=not new_run)
        handle.resume_plan = plan
        return handle

    async def _adopt(self, run_id: str) -> Callable[[], Awaitable[RunOutcome]]:
        """An execution of ``run_id`` that continues it in place (a step DBOS runs again)."""
        _, execution = await self._prepare.resume(run_id, None, None, None, set())
        return lambda: run_keeping_conversation(execution.run(), self.store, self.log, execution.run_id)

    async def runtime(self) -> DurableRuntime:
        """DBOS in this process, launched on first use (only processes that execute runs launch it)."""
        if self._durable is None:
            from baton.runs import workflows

            self._durable = await workflows.acquire(
                self.settings, self.concurrency, fleet=self._fleet, labels=self._labels
            )
        return self._durable

    # The fleet (baton.runs.fleet, docs/fleet.md).

    async def queue(self, spec: RunSpec) -> RunRecord:
        """Record the run and enqueue it on the fleet's queue; a worker clones its repository and
        executes it (``fleet_requires_postgres`` on SQLite). Nothing is made or started here."""
        require_postgres(self.settings, "queueing a run for the fleet")
        runtime = await self.runtime()
        record = await self._prepare.queue(spec)  # labels and priority checked
        labels = run_labels(record)
        await self._register_fleet_queue(runtime, queue_name(labels))
        live = bool(await self.store.live_executor_keys())
        reason = waiting_reason(labels, await self.store.offered_queue_keys(), live)
        await self.store.update_run(record.id, status_reason=reason)
        await runtime.enqueue_fleet(record.id, record.owner, labels=labels, priority=run_priority(record))
        return await self.store.get_run(record.id)

    async def join_fleet(self, worker_concurrency: int | None = None) -> DurableRuntime:
        """Take runs from the fleet's queue in this process (``Baton(fleet=True)``): this executor's
        advisory lock first, then the queue (``fleet_requires_postgres`` on SQLite)."""
        require_postgres(self.settings, "a worker taking queued runs")
        if not self._fleet:
            raise RuntimeError("join_fleet needs Baton(fleet=True)")
        runtime = await self.runtime()
        runtime.fleet_concurrency = worker_concurrency
        await runtime.hold_lock()
        await runtime.offer_queues()
        runtime.serve_fleet(self.store, self._dequeued, lambda run_id: self.enqueue_again(run_id, None))
        await runtime.register_served_queues()
        await self.refresh_queue_reasons()
        return runtime

    async def refresh_queue_reasons(self) -> list[str]:
        """Each queued fleet run's ``status_reason`` made true again (``waiting_for_worker``,
        ``no_worker_with_labels``, ``no_live_worker``): workers joined or left. The runs changed."""
        waiting = (WAITING, NO_WORKER, NO_LABELLED_WORKER)
        queued = [
            record
            for record in await self.store.list_runs(status="queued")
            if fleet_request(record) and not record.executor_id and record.status_reason in waiting
        ]
        if not queued:
            return []
        offered = await self.store.offered_queue_keys()
        live = bool(await self.store.live_executor_keys())
        changed = []
        for record in queued:
            reason = waiting_reason(run_labels(record), offered, live)
            if reason != record.status_reason:
                await self.store.update_run(record.id, status_reason=reason)
                changed.append(record.id)
        return changed

    async def enqueue_again(self, run_id: str, owner: str | None) -> None:
        """The next attempt of a fleet run released from a dead executor (baton.runs.fleet.Takeover),
        or given back by a worker that stops: on its label set's queue, at its priority."""
        runtime = await self.runtime()
        record = await self.store.get_run(run_id)
        await runtime.enqueue_fleet(
            run_id, owner or record.owner, labels=run_labels(record), priority=run_priority(record)
        )

    async def _register_fleet_queue(self, runtime: DurableRuntime, name: str) -> None:
        if name not in self._fleet_queues_registered:
            await runtime.register_fleet_queue(name)
            self._fleet_queues_registered.add(name)

    async def _dequeued(self, run_id: str) -> Callable[[], Awaitable[RunOutcome]]:
        """The execution of a fleet run this worker dequeued, prepared from the store."""
        metrics = self.telemetry.metrics if self.telemetry is not None else None
        queued = await self.store.get_run(run_id) if metrics is not None else None
        execution = await self._prepare.dequeued(run_id, self._executing())
        if metrics is not None and queued is not None and queued.status == "queued":  # a first attempt
            metrics.dispatched(queued.created_at)
        # Fenced: written only while this executor has it (docs/fleet.md "Fencing").
        executor = this_executor_id()
        self.store.fence(run_id, executor)
        self.log.fence(run_id, executor)

        async def execute() -> RunOutcome:
            try:
                return await run_keeping_conversation(execution.run(), self.store, self.log, run_id)
            finally:
                self.store.unfence(run_id)

        return execute

    async def _execute(self, execution: RunExecution, *, taken_over: bool = False) -> RunHandle:
        """Submit a built execution to this process's durable runtime; the handle of the run. A new
        run is its workflow's attempt 1; a run taken over the next attempt."""
        run_id = execution.run_id
        runtime = await self.runtime()
        attempt = await runtime.next_attempt(run_id) if taken_over else 1

        def execute() -> Awaitable[RunOutcome]:
            return run_keeping_conversation(execution.run(), self.store, self.log, run_id)

        done = await runtime.submit(run_id, execute, store=self.store, adopt=self._adopt, attempt=attempt)
        handle = RunHandle(execution, done, self)
        self._runs[run_id] = handle
        return handle

    async def runs(self, status: str | None = None) -> list[RunRecord]:
        """Runs oldest first; a ``running`` run whose executor is dead is ``interrupted``."""
        return await self.queries.list_runs(status)

    # Gates (docs/gates.md): the same decisions as the CLI and the HTTP API, from any process.

    async def gates(self, *, run_id: str | None = None, status: str | None = None) -> list[Gate]:
        """Gates (of ``run_id``, with ``status``) oldest first, as handles that decide them
        (``approve``, ``deny``, ``answer``, ``review_plan``, ``continue_run``)."""
        ledger = GateLedger(self.store)
        return [self._gate_handle(ledger, record) for record in await ledger.list(run_id=run_id, status=status)]

    async def gate(self, gate_id: str) -> Gate:
        """One gate (``gate_not_found``)."""
        ledger = GateLedger(self.store)
        return self._gate_handle(ledger, await ledger.get(gate_id))

    def _gate_handle(self, ledger: GateLedger, record: GateRecord) -> Gate:
        return Gate(ledger, record, decided_by=local_user(), on_decided=wake_local)  # a run here wakes at once

    # Hand-off to another BATON_HOME (baton.runs.handoff, docs/handoff.md).

    async def export_run(self, run_id: str, path: Path) -> ExportResult:
        """Write the run (log, events, snapshots and their archives, agent home) to one file;
        refused with ``run_active`` while it executes."""
        return await self.queries.export_run(run_id, Path(path), executing=self._executing())

    async def import_run(
        self, path: Path, *, repo: Path | None = None, base_repo: Path | None = None, force: bool = False
    ) -> ImportResult:
        """Recreate an exported run here (same id; ``run_exists`` if this home has it), its latest
        snapshot restored into ``repo`` (default: the run's recorded repository; the base commit's
        files from its own repository, else from ``base_repo``), ready to resume."""
        return await self.queries.import_run(Path(path), repo=repo, base_repo=base_repo, force=force)

    # Commands through the run's inbox, from any process (baton.runs.inbox).

    async def cancel(self, run_id: str, reason: str | None = None) -> int:
        """Cancel the run wherever it executes; the inbox id. A parked run (no executor) ends
        ``cancelled`` at once, its pending gates denied (``interrupt``, reason ``cancelled``)."""
        handle = self._runs.get(run_id)
        if handle is not None and handle.executing:
            inbox_id = await post_command(self.store, run_id, "cancel", {"reason": reason} if reason else {})
            handle.cancel()  # executing here: at once
            return inbox_id
        return (await cancel_run(self.store, run_id, reason)).inbox_id

    async def cancel_parked(self, run_id: str) -> bool:
        """End a parked run (``paused``, no live executor) as ``cancelled``; False when it is not parked."""
        return await end_parked(self.store, run_id)

    async def fork(
        self,
        run_id: str,
        prompt: str | None = None,
        *,
        turn: int | None = None,
        seq: int | None = None,
        repo: Path | None = None,
        **spec_changes: Any,
    ) -> RunHandle:
        """A new run continuing ``run_id``'s conversation from turn ``turn`` (or log ``seq``) on the
        snapshot taken there (baton.runs.forking); the original is only read."""
        from baton.runs.forking import fork_run

        return await fork_run(self, run_id, turn=turn, seq=seq, prompt=prompt, repo=repo, spec_changes=spec_changes)

    async def send(self, run_id: str, text: str) -> int:
        """A message for an interactive run (its next prompt); the inbox id."""
        return await post_command(self.store, run_id, "user_message", {"content": text})

    async def close(self, run_id: str) -> int:
        """End an interactive run after the turns asked before; the inbox id."""
        return await post_command(self.store, run_id, "close", {})

    async def set_permission_mode(self, run_id: str, permission_mode: str) -> int:
        """Switch the run's permission mode for its later decisions; the inbox id."""
        return await post_command(self.store, run_id, "set_permission_mode", {"permission_mode": permission_mode})

    def entries(self, run_id: str, after: int = 0) -> AsyncIterator[LogEntry]:
        """The run's committed log entries, then live ones until the run's log closes."""
        return self.log.subscribe(run_id, after=after)

    async def events(self, run_id: str, after: int = 0) -> AsyncIterator[RunnerEvent]:
        """Runner events, projected from the log; ``seq`` is the same on every read."""
        projector = Projector(run_id)
        async for entry in self.log.subscribe(run_id):
            for event in projector.feed(entry):
                if event["seq"] > after:
                    yield event
