"""The light core API: runs as every face shows them, and the commands any process may send them.

:class:`Runs` reads runs (with their *effective* status: a ``running`` run whose executor is
dead is ``interrupted``), their status changes, log entries and runner events, snapshots and
gates, and posts inbox commands; it imports no agent code. The CLI's read commands and the
HTTP routes read through it, so that a rule such as the effective status is applied in one
place and every face shows the same run object.

Two ways to get one:

- ``async with Runs(settings) as runs:`` opens the configured store; on a SQLite store at the
  newest revision it reads with the standard ``sqlite3`` (:mod:`baton.store.reads`) and opens
  SQLAlchemy's :class:`~baton.store.Store` only for a write (a command, an expired gate);
- ``Baton.queries`` is one over the ``Baton``'s open store and live session log (the server's).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Collection, Mapping
from contextlib import aclosing, suppress
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from baton.config import Settings
from baton.errors import NotFoundError, UsageError
from baton.events.entry import LogEntry, utc_timestamp
from baton.runs.executors import effective_status
from baton.store.reads import RunReads, SqliteReads
from baton.store.records import GATE_STATUSES, RUN_STATUSES, GateRecord, RunRecord, TaskRecord, Transition

if TYPE_CHECKING:
    from baton.events.project import RunnerEvent
    from baton.results import BranchOutcome, Merged, Results
    from baton.runs.cancelling import Cancelled
    from baton.runs.handoff import ExportResult, ImportResult
    from baton.runs.record_scenario import RecordedScenario, WrittenAs
    from baton.store import SessionLog, Store
    from baton.workspaces.gc import GcResult, WorkspaceEntry
    from baton.workspaces.removal import RemovedRun, RunsGcResult

__all__ = [
    "GATE_STATUSES",
    "POLL_SECONDS",
    "RUN_STATUSES",
    "GateRecord",
    "RunRecord",
    "Runs",
    "TaskRecord",
    "Transition",
    "effective_record",
    "is_final_status",
]

POLL_SECONDS: Final = 0.1  # following a run executed by another process: how often the store is read
_PROMPT_ENTRIES: Final = 5  # a run's ``_baton/run_started`` is among its first log entries


def effective_record(record: RunRecord) -> RunRecord:
    """The record as shown: ``interrupted`` (reason ``executor_dead``) for a ``running`` run whose executor is dead."""
    status = effective_status(record.status, record.executor_id, record.heartbeat_at)
    if status == record.status:
        return record
    return replace(record, status=status, status_reason="executor_dead")


def is_final_status(entry: LogEntry) -> bool:
    """The ``_baton/status`` entry that ends a run."""
    if entry["method"] != "_baton/status" or entry["direction"] != "baton":
        return False
    params = entry["payload"].get("params") or {}
    return params.get("status") in ("finished", "failed", "cancelled")


class Runs:
    """Runs, their logs, snapshots, gates and commands, from any process; an async context manager."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings.load()
        self._reads: RunReads | None = None
        self._store: Store | None = None
        self._log: SessionLog | None = None
        self._owned = True

    @classmethod
    def over(cls, store: Store, log: SessionLog, settings: Settings) -> Runs:
        """Queries over an open store and its session log (a ``Baton``'s); closing them is the owner's."""
        runs = cls(settings)
        runs._store, runs._log, runs._owned = store, log, False
        runs._reads = _StoreReads(store, log)
        return runs

    async def __aenter__(self) -> Runs:
        if self._reads is None:
            self.settings.home.mkdir(parents=True, exist_ok=True)
            reads = await asyncio.to_thread(SqliteReads.open, self.settings.resolved_database_url)
            self._reads = reads if reads is not None else _StoreReads(await self._writable(), None)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if not self._owned:
            return
        reads, store = self._reads, self._store
        self._reads = self._store = None
        if isinstance(reads, SqliteReads):
            await reads.aclose()
        if store is not None:
            await store.aclose()

    @property
    def _read(self) -> RunReads:
        if self._reads is None:
            raise RuntimeError("use `async with Runs(...)` first")
        return self._reads

    async def _writable(self) -> Store:
        """The SQLAlchemy store, opened (and migrated) on the first write."""
        if self._store is None:
            from baton.store import Store

            self._store = await asyncio.to_thread(Store.open, self.settings.resolved_database_url)
        return self._store

    # Runs.

    async def list_runs(self, status: str | None = None) -> list[RunRecord]:
        """Runs oldest first, with their effective status (and only those with ``status``)."""
        records = [effective_record(record) for record in await self._read.list_runs()]
        return [record for record in records if status is None or record.status == status]

    async def get_run(self, run_id: str) -> RunRecord:
        """One run with its effective status, or ``run_not_found``."""
        return effective_record(await self._read.get_run(run_id))

    async def transitions(self, run_id: str) -> list[Transition]:
        """Every status the run moved into, oldest first (as recorded: ``interrupted`` is never recorded)."""
        return await self._read.list_transitions(run_id)

    async def prompt(self, record: RunRecord) -> str | None:
        """What the run was asked: its task's title, else its prompt (kept with the run, or logged at its start)."""
        task = None
        if record.task_id is not None:
            with suppress(NotFoundError):  # a task removed since: the run's own prompt then
                task = await self._read.get_task(record.task_id)
        if task is not None and task.title:
            return task.title
        request = record.request
        if isinstance(request, dict) and isinstance(request.get("prompt"), str):
            return str(request["prompt"])
        if task is not None:
            return task.prompt
        for entry in await self._read.read_log(record.id, until=_PROMPT_ENTRIES):
            if entry["method"] == "_baton/run_started":
                prompt = (entry["payload"].get("params") or {}).get("prompt")
                return prompt if isinstance(prompt, str) else None
        return None

    # Tasks.

    async def get_task(self, task_id: str) -> TaskRecord:
        """One task, or ``task_not_found``."""
        return await self._read.get_task(task_id)

    async def create_task(
        self,
        prompt: str,
        *,
        repo: str | None = None,
        title: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        owner: str | None = None,
    ) -> TaskRecord:
        """Store a task for runs to name (``task_id``)."""
        store = await self._writable()
        return await store.create_task(prompt, repo=repo, title=title, metadata=metadata, owner=owner)

    # The log.

    async def log_position(self, run_id: str) -> int:
        """The seq of the run's last committed log entry (0 for an empty log)."""
        return await self._read.log_position(run_id)

    async def read_log(self, run_id: str, after: int = 0, until: int | None = None) -> list[LogEntry]:
        """Committed entries with ``after < seq <= until``, or ``run_not_found``."""
        await self._read.get_run(run_id)
        return await self._read.read_log(run_id, after=after, until=until)

    async def last_note(self, run_id: str, method: str) -> dict[str, Any] | None:
        """The params of the run's last log entry of ``method`` (e.g. ``_baton/sandbox``), or None
        (``run_not_found`` for no such run). One row is read, whatever the log's length."""
        await self._read.get_run(run_id)
        return await self._read.last_params(run_id, method)

    async def runner_events(self, run_id: str, after: int = 0) -> list[RunnerEvent]:
        """The run's runner events with ``seq > after``, projected from its whole log."""
        from baton.events.project import project

        return [event for event in project(await self.read_log(run_id)) if event["seq"] > after]

    async def follow_log(
        self, run_id: str, after: int = 0, *, through_interruption: bool = False, poll_seconds: float = POLL_SECONDS
    ) -> AsyncGenerator[LogEntry, None]:
        """Committed entries with ``seq > after`` as they are committed, wherever the run executes.

        Live from the session log when this process executes the run, else read from the store
        every ``poll_seconds``. Ends with the run: after its final ``_baton/status`` entry, once
        its record has ended, or once it is ``interrupted`` (with ``through_interruption``, only
        once its record has ended: another process may take the run over).
        """
        await self.get_run(run_id)  # run_not_found before anything is yielded
        cursor = after
        if self._log is not None:
            async with aclosing(self._log.subscribe(run_id, after=after)) as live:
                async for entry in live:
                    yield entry
                    cursor = entry["seq"]
        while True:
            record = await self.get_run(run_id)  # read first: entries read after it are all there is
            ended = record.is_terminal or (record.status == "interrupted" and not through_interruption)
            entries = await self._read.read_log(run_id, after=cursor)
            for entry in entries:
                yield entry
                cursor = entry["seq"]
                if not through_interruption and is_final_status(entry):
                    return
            if ended:
                return
            if not entries:
                await asyncio.sleep(poll_seconds)

    # Snapshots.

    async def snapshots(self, run_id: str) -> list[dict[str, Any]]:
        """The run's snapshots oldest first: the store's records, else its shadow repository's."""
        record = await self._read.get_run(run_id)
        found = await self._read.list_snapshots(run_id)
        if found:
            return found
        shadow = self._shadow(record)
        return [{"run_id": run_id, **snapshot} for snapshot in await asyncio.to_thread(shadow.snapshots)]

    async def snapshot(self, run_id: str, snapshot_id: str) -> dict[str, Any]:
        """One snapshot, or ``snapshot_not_found``."""
        return _pick(await self.snapshots(run_id), run_id, snapshot_id)

    async def diff(self, run_id: str, from_: str | None = None, to: str | None = None) -> bytes:
        """A git patch between two snapshots: ``from_`` a snapshot id, ``base`` (the default) or
        ``start``; ``to`` a snapshot id (default: the last one)."""
        from baton.snapshots import EMPTY_TREE

        found = await self.snapshots(run_id)
        if not found:
            raise NotFoundError("snapshot_not_found", f"run {run_id} has no snapshots")
        target = _pick(found, run_id, to) if to else found[-1]
        if from_ is None or from_ == "base":
            old = str(target.get("base_commit") or EMPTY_TREE)
        elif from_ == "start":
            old = "refs/baton/start"
        else:
            old = str(_pick(found, run_id, from_)["tree_hash"])
        shadow = self._shadow(await self._read.get_run(run_id))
        if not shadow.exists:
            raise NotFoundError("snapshot_not_found", f"the shadow repository of run {run_id} is gone")
        return await asyncio.to_thread(
            shadow.git, "diff", "--no-color", "--binary", "-M", old, str(target["tree_hash"])
        )

    def _shadow(self, record: RunRecord) -> Any:
        from baton.snapshots import shadow_for

        return shadow_for(self.settings.run_dir(record.id), Path(record.repo or record.cwd or "."))

    # Gates.

    async def gates(
        self, *, run_id: str | None = None, status: str | None = None, owner: str | None = None
    ) -> list[GateRecord]:
        """Gates oldest first (of ``run_id``, with ``status``, of runs ``owner`` owns); a gate past its
        deadline is expired first, so it is listed as what it is. ``run_not_found`` for an unknown run."""
        if run_id is not None:
            await self._read.get_run(run_id)
        now = utc_timestamp()
        pending = await self._read.list_gates(run_id, "pending", owner)
        if any(gate.expires_at is not None and gate.expires_at <= now for gate in pending):
            from baton.gates.ledger import GateLedger

            await GateLedger(await self._writable()).expire_due(run_id)
        return await self._read.list_gates(run_id, status, owner)

    async def gate(self, gate_id: str) -> GateRecord:
        """One gate, or ``gate_not_found``."""
        return await self._read.get_gate(gate_id)

    # Hand-off to another BATON_HOME (docs/handoff.md).

    async def export_run(self, run_id: str, out: Path, *, executing: Collection[str] = ()) -> ExportResult:
        """Write the run to one file; ``run_active`` while it executes (``executing``: runs executing here)."""
        from baton.runs.handoff import export_run

        return await export_run(await self._writable(), self.settings, run_id, out, executing=executing)

    async def import_run(
        self, path: Path, *, repo: Path | None = None, base_repo: Path | None = None, force: bool = False
    ) -> ImportResult:
        """Recreate an exported run here, its latest snapshot restored into ``repo`` (docs/handoff.md)."""
        from baton.runs.handoff import import_run

        return await import_run(
            await self._writable(), self.settings, path, repo=repo, base_repo=base_repo, force=force
        )

    # Record and replay (docs/scenarios.md "A run made into a test").

    async def record_scenario(
        self, run_id: str, out: Path, *, written_as: WrittenAs | None = None, force: bool = False
    ) -> RecordedScenario:
        """Write the run's model answers to ``out`` as a cassette or a scenario (baton.runs.record_scenario):
        ``run_not_found``, ``run_not_recorded`` (a real endpoint without a recording, a cassette gone),
        ``output_exists`` (without ``force``)."""
        from baton.runs.record_scenario import record_scenario

        record = await self._read.get_run(run_id)
        opening = await self._read.read_log(run_id, until=_PROMPT_ENTRIES * 2)
        return await record_scenario(record, opening, Path(out), written_as=written_as, force=force)

    async def cassette(self, run_id: str) -> Path:
        """The cassette file the run recorded or replayed: ``run_not_found``, ``run_not_recorded``."""
        from baton.runs.record_scenario import run_cassette

        record = await self._read.get_run(run_id)
        return run_cassette(record, await self._read.read_log(run_id, until=_PROMPT_ENTRIES * 2))

    # Results: the run's branch (docs/workspaces.md "Results").

    async def branch(self, run_id: str, *, snapshot_id: str | None = None, name: str | None = None) -> BranchOutcome:
        """Commit the run's last snapshot (or ``snapshot_id``) on its base as a new branch (default
        ``baton/<short id>``; ``branch_exists``), pushed and handed to ``result.on_branch`` as
        configured; ``made`` is None when the run changed nothing. ``run_active`` while it executes."""
        return await (await self._results()).branch(run_id, snapshot_id=snapshot_id, name=name)

    async def push(self, run_id: str, remote: str | None = None) -> dict[str, Any]:
        """Push the run's branch to ``remote`` (default ``origin``; ``push_failed``); the run's result."""
        return await (await self._results()).push(run_id, remote)

    async def merge(self, run_id: str, into: str | None = None) -> Merged:
        """Merge the run's branch into ``into`` (default: the branch checked out in its repository):
        a fast-forward or a merge commit; ``merge_conflict`` or ``workspace_dirty`` change nothing."""
        return await (await self._results()).merge(run_id, into)

    async def _results(self) -> Results:
        from baton.results import Results

        return Results(await self._writable(), self.settings, self._log)

    # Commands.

    # Workspaces (baton.workspaces.gc, docs/workspaces.md).

    async def workspaces(self) -> list[WorkspaceEntry]:
        """Every workspace with its runs, size on disk and branch."""
        from baton.workspaces.gc import list_workspaces

        records = await self.list_runs()
        return await asyncio.to_thread(list_workspaces, self.settings, records)

    async def collect_workspaces(
        self, *, older_than: float | None = None, dry_run: bool = False, force: bool = False
    ) -> GcResult:
        """``baton gc``: remove the workspaces of ended runs (older than ``older_than`` seconds,
        default ``[workspace] retention``), never one with an unmerged, unpushed branch unless ``force``."""
        from baton.workspaces.gc import collect

        entries = await self.workspaces()
        limit = older_than if older_than is not None else self.settings.workspace_retention_seconds
        return await asyncio.to_thread(collect, self.settings, entries, older_than=limit, dry_run=dry_run, force=force)

    async def collect_runs(
        self, *, older_than: float | None = None, dry_run: bool = False, force: bool = False
    ) -> RunsGcResult:
        """``baton gc --runs``: remove entirely the runs that ended longer ago than ``older_than``
        seconds (default ``[runs] retention``; neither: ``invalid_argument``), as ``baton rm`` would,
        keeping those whose workspace ``rm`` refuses without ``force``."""
        from baton.workspaces.removal import collect_runs

        limit = older_than if older_than is not None else self.settings.run_retention_seconds
        if limit is None:
            raise UsageError(
                "invalid_argument",
                "baton gc --runs removes runs entirely: give --older-than (e.g. 30d) or set [runs] retention",
            )
        store = await self._writable()
        return await collect_runs(
            store, self.settings, await self.list_runs(), older_than=limit, dry_run=dry_run, force=force
        )

    async def remove_run(self, run_id: str, *, force: bool = False) -> RemovedRun:
        """``baton rm``: the run removed entirely (refused while it is live)."""
        from baton.workspaces.removal import remove_run

        record = await self.get_run(run_id)
        return await remove_run(await self._writable(), self.settings, record, await self.list_runs(), force=force)

    async def post_command(self, run_id: str, kind: str, payload: dict[str, Any]) -> int:
        """Queue an inbox command (``cancel``, ``user_message``, ``close``, ``set_permission_mode``)
        for whichever process executes the run; its inbox id (refusals: :func:`baton.runs.inbox.post_command`)."""
        from baton.runs.inbox import post_command

        return await post_command(await self._writable(), run_id, kind, payload)

    async def cancel(self, run_id: str, reason: str | None = None) -> Cancelled:
        """Cancel a run from any process: queued for its executor, or a parked run (which no process
        executes) ended at once (:func:`baton.runs.cancelling.cancel_run`)."""
        from baton.runs.cancelling import cancel_run

        return await cancel_run(await self._writable(), run_id, reason)


def _pick(found: list[dict[str, Any]], run_id: str, snapshot_id: str) -> dict[str, Any]:
    for snapshot in found:
        if snapshot["id"] == snapshot_id:
            return snapshot
    raise NotFoundError("snapshot_not_found", f"run {run_id} has no snapshot {snapshot_id}")


class _StoreReads:
    """:class:`RunReads` over SQLAlchemy's store, its session log and the gate ledger (Postgres, the server)."""

    def __init__(self, store: Store, log: SessionLog | None) -> None:
        from baton.gates.ledger import GateLedger
        from baton.store import Redactor, SessionLog

        self._store = store
        self._log = log if log is not None else SessionLog(store, Redactor())  # never entered: it only reads
        self._ledger = GateLedger(store)

    async def get_run(self, run_id: str) -> RunRecord:
        return await self._store.get_run(run_id)

    async def list_runs(self, status: str | None = None) -> list[RunRecord]:
        return await self._store.list_runs(status)

    async def list_transitions(self, run_id: str) -> list[Transition]:
        return await self._store.list_transitions(run_id)

    async def get_task(self, task_id: str) -> TaskRecord:
        return await self._store.get_task(task_id)

    async def log_position(self, run_id: str) -> int:
        return await self._store.log_position(run_id)

    async def read_log(self, run_id: str, after: int = 0, until: int | None = None) -> list[LogEntry]:
        return await self._log.read(run_id, after=after, until=until)

    async def last_params(self, run_id: str, method: str) -> dict[str, Any] | None:
        return await self._log.last_params(run_id, method)

    async def list_snapshots(self, run_id: str) -> list[dict[str, Any]]:
        return await self._store.list_snapshots(run_id)

    async def list_gates(
        self, run_id: str | None = None, status: str | None = None, owner: str | None = None
    ) -> list[GateRecord]:
        return await self._ledger.list(run_id=run_id, status=status, owner=owner)

    async def get_gate(self, gate_id: str) -> GateRecord:
        return await self._ledger.get(gate_id)

    async def aclose(self) -> None:
        """Nothing of its own to close: the store is its owner's."""
