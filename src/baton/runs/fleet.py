"""The fleet (docs/fleet.md): API servers that queue runs, workers that take them, on one Postgres.

- ``baton serve --no-execute`` (and ``baton run --queue``) records a run ``queued`` with its
  whole request (``runs.request``: the prompt, the rules, ``fleet``: the repository to clone and
  the ref) and no executor, and enqueues its workflow (``baton_fleet_run``, attempt
  ``<run_id>:1``) on DBOS's queue :data:`FLEET_QUEUE` in the shared Postgres. Nothing is made
  on the server: no workspace, no agent.
- ``baton worker`` listens on that queue. DBOS dequeues within the queue's limits
  (:func:`queue_limits`: ``fleet.concurrency`` across the fleet, ``fleet.worker_concurrency``
  per worker, ``fleet.owner_concurrency`` per owner as DBOS partitions); the dequeued step
  prepares the execution from the store on that worker (baton.runs.preparing
  ``Preparer.dequeued``): a clone of the repository through the worker's mirror cache, the
  agent, the run claimed with the store's compare-and-set on ``runs.executor_id``.
- Liveness: each worker holds a session-level advisory lock (baton.store.liveness). A fleet run
  whose executor's lock is gone on two scans in a row is released (from the dead executor to
  none, in one statement that checks the lock is still not held) and a new attempt
  ``<run_id>:<n+1>`` is enqueued on the same queue (:class:`Takeover`, run by every worker):
  whichever worker dequeues it continues the run from its log and its latest snapshot in a
  workspace of its own. The heartbeat stays the fallback for executors that hold no lock. A
  worker that loses its own lock stops its runs unless it takes the lock again in time
  (baton.runs.lock_watch).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

from baton.config import Settings
from baton.errors import BatonError, RefusedError
from baton.store import Store
from baton.store.liveness import executor_key
from baton.store.records import RunRecord

__all__ = [
    "FLEET_QUEUE",
    "FLEET_WORKFLOW",
    "NO_WORKER",
    "WAITING",
    "Takeover",
    "dbos_schema",
    "enqueue_options",
    "fleet_request",
    "is_postgres",
    "queue_limits",
    "require_postgres",
]

FLEET_QUEUE: Final = "baton-fleet"
FLEET_WORKFLOW: Final = "baton_fleet_run"
# A queued fleet run's status_reason: a worker is alive and it waits for a slot, or none is.
WAITING: Final = "waiting_for_worker"
NO_WORKER: Final = "no_live_worker"
TAKEOVER_SCAN_SECONDS: Final = 1.0
_TAKEN_OVER: Final = ("queued", "running", "interrupted")


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql", "postgres:"))


def require_postgres(settings: Settings, what: str) -> None:
    """``fleet_requires_postgres`` unless the store is Postgres."""
    if not is_postgres(settings.resolved_database_url):
        raise RefusedError(
            "fleet_requires_postgres",
            f"{what} needs the fleet's shared Postgres (BATON_DATABASE_URL=postgresql://…); this home's "
            f"store is SQLite ({settings.resolved_database_url}), which serves one machine only",
        )


def dbos_schema(url: str) -> str:
    """DBOS's system schema in baton's Postgres database: ``dbos``, or ``dbos_<schema>`` when the URL
    puts baton's tables in a schema of their own (``options=-csearch_path=S``), so two stores in
    one database never share a queue."""
    query = parse_qs(urlsplit(url).query)
    for option in query.get("options", []):
        for part in unquote(option).split():
            if part.startswith("-csearch_path="):
                schema = part.removeprefix("-csearch_path=").split(",")[0].strip()
                if schema.isidentifier():
                    return f"dbos_{schema}"
    return "dbos"


def queue_limits(settings: Settings, worker_concurrency: int | None = None) -> dict[str, Any]:
    """The fleet queue's limits for ``DBOS.register_queue``: global, per worker, per owner, poll."""
    per_worker = worker_concurrency or settings.fleet_worker_concurrency
    total = settings.fleet_concurrency
    limits: dict[str, Any] = {
        "worker_concurrency": per_worker if total is None else min(per_worker, total),
        "global_concurrency": total,
        "polling_interval_sec": settings.fleet_poll_seconds,
    }
    if settings.fleet_owner_concurrency is not None:
        owner = settings.fleet_owner_concurrency if total is None else min(settings.fleet_owner_concurrency, total)
        limits["partition_concurrency"] = owner
    return limits


def fleet_request(record: RunRecord) -> Mapping[str, Any] | None:
    """What a fleet run's worker clones and where it starts (``runs.request["fleet"]``); None for
    a run executed where it was started."""
    request = record.request
    found = request.get("fleet") if isinstance(request, Mapping) else None
    return found if isinstance(found, Mapping) else None


def enqueue_options(settings: Settings, run_id: str, attempt: int, owner: str | None) -> dict[str, Any]:
    """DBOS's ``EnqueueOptions`` of one attempt of a fleet run."""
    from baton.runs.workflows import APPLICATION_VERSION

    options: dict[str, Any] = {
        "workflow_name": FLEET_WORKFLOW,
        "queue_name": FLEET_QUEUE,
        "workflow_id": f"{run_id}:{attempt}",
        "app_version": APPLICATION_VERSION,
    }
    if settings.fleet_owner_concurrency is not None:
        options["queue_partition_key"] = owner or "local"
    return options


class Takeover:
    """Continues the fleet runs of executors that died: releases each (compare-and-set) and
    enqueues its next attempt. Every worker runs one; the compare-and-set lets one win."""

    def __init__(
        self,
        store: Store,
        enqueue: Callable[[str, str | None], Any],
        *,
        interval: float = TAKEOVER_SCAN_SECONDS,
        report: Callable[[str], None] | None = None,
        depth: Callable[[int], None] | None = None,
    ) -> None:
        self._store = store
        self._depth = depth  # told each scan how many fleet runs wait queued (baton_queue_depth)
        self._enqueue = enqueue  # (run_id, owner) → awaitable: the next attempt on the queue
        self._interval = interval
        self._report = report or (lambda line: sys.stderr.write(line + "\n"))
        self.taken: list[str] = []
        # Executors whose lock the previous scan found gone: one scan's absence is not enough
        # (after a Postgres restart every worker takes its lock again within a moment).
        self._missing: set[str] = set()

    async def scan(self) -> list[str]:
        """One pass: every fleet run held by an executor whose lock is gone, released and enqueued."""
        listed = [record for record in await self._store.list_runs(status=_TAKEN_OVER) if fleet_request(record)]
        if self._depth is not None:
            self._depth(sum(1 for record in listed if record.status == "queued" and not record.executor_id))
        held = [record for record in listed if record.executor_id]
        if not held:
            self._missing = set()
            return []
        live = await self._store.live_executor_keys()
        missing = {str(record.executor_id) for record in held if executor_key(str(record.executor_id)) not in live}
        dead, self._missing = missing & self._missing, missing
        taken = []
        for record in held:
            assert record.executor_id is not None
            if record.executor_id not in dead:
                continue
            if not await self._store.release_dead_run(record.id, record.executor_id):
                continue  # another worker released it first, or its executor took its lock again
            try:
                await self._enqueue(record.id, record.owner)
            except Exception as exc:  # DBOS's errors too: the run must not stay released with no attempt
                # Give it back to the dead executor, so that the next scan (here or elsewhere) retries.
                await self._store.claim_run(record.id, expected_executor=None, executor_id=record.executor_id)
                self._report(f"baton: cannot enqueue run {record.id} again (retried next scan): {_said(exc)}")
                continue
            taken.append(record.id)
            self.taken.append(record.id)
            self._report(f"baton: run {record.id} of dead executor {record.executor_id} enqueued again")
        return taken

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.scan()
            except Exception as exc:  # a scan that fails is tried again: the task never dies silently
                self._report(f"baton: takeover scan failed: {_said(exc)}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._interval)


def _said(exc: Exception) -> str:
    return f"{exc.code}: {exc.message}" if isinstance(exc, BatonError) else f"{type(exc).__name__}: {exc}"
