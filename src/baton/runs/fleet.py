"""The fleet (docs/fleet.md): API servers that queue runs, workers that take them, on one Postgres.

- ``baton serve --no-execute`` (and ``baton run --queue``) records a run ``queued`` with its
  whole request (``runs.request``: the prompt, the rules, ``fleet``: the repository to clone and
  the ref) and no executor, and enqueues its workflow (``baton_fleet_run``, attempt
  ``<run_id>:1``) on DBOS's queue :data:`FLEET_QUEUE` in the shared Postgres. Nothing is made
  on the server: no workspace, no agent.
- Labels and priority (docs/fleet.md "Labels and priority"): a run asking for labels
  (``{"gpu": "yes"}``) goes on the queue of its label set (:func:`queue_name`); a worker started
  with ``--labels`` listens on the queue of every subset of its labels (:func:`served_queues`),
  so it takes the runs whose labels it has. ``priority`` is DBOS's: lower first.
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
import itertools
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

from baton.config import Settings
from baton.errors import BatonError, RefusedError, UsageError
from baton.store import Store
from baton.store.liveness import executor_key
from baton.store.queue_offers import queue_key
from baton.store.records import RunRecord

__all__ = [
    "DEFAULT_PRIORITY",
    "FLEET_QUEUE",
    "FLEET_WORKFLOW",
    "MAX_LABELS",
    "MAX_PRIORITY",
    "MIN_PRIORITY",
    "NO_LABELLED_WORKER",
    "NO_WORKER",
    "WAITING",
    "Takeover",
    "check_labels",
    "check_priority",
    "dbos_schema",
    "enqueue_options",
    "fleet_request",
    "is_postgres",
    "parse_labels",
    "queue_limits",
    "queue_name",
    "require_postgres",
    "run_labels",
    "run_priority",
    "served_queues",
    "waiting_reason",
]

FLEET_QUEUE: Final = "baton-fleet"
FLEET_WORKFLOW: Final = "baton_fleet_run"
# A queued fleet run's status_reason: a worker is alive and it waits for a slot, or none is.
WAITING: Final = "waiting_for_worker"
NO_WORKER: Final = "no_live_worker"
# Workers are alive, but none has every label the run asks for: nobody can take it yet.
NO_LABELLED_WORKER: Final = "no_worker_with_labels"
# DBOS's priority range; lower numbers are dequeued first. A run that names none gets the
# default, so that a run can be put ahead of the ordinary ones as well as behind them.
MIN_PRIORITY: Final = 1
MAX_PRIORITY: Final = 2**31 - 1
DEFAULT_PRIORITY: Final = 100
# At most this many labels on a run or a worker: a worker serves every subset of its labels
# (2**6 = 64 queues at most, each polled only once a run of it was queued).
MAX_LABELS: Final = 6
_LABEL_KEY: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_LABEL_VALUE: Final = re.compile(r"[A-Za-z0-9._-]{1,63}")
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


def check_labels(labels: Mapping[str, Any] | None, what: str = "labels") -> dict[str, str]:
    """``labels`` as a plain, sorted mapping, or ``invalid_labels``: at most :data:`MAX_LABELS`,
    keys of letters, digits, ``.``, ``_`` and ``-`` (63 at most, not starting with a sign),
    values the same (1–63)."""
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise UsageError("invalid_labels", f'{what}: an object of label names to values, like {{"gpu": "yes"}}')
    if len(labels) > MAX_LABELS:
        raise UsageError("invalid_labels", f"{what}: at most {MAX_LABELS} labels, not {len(labels)}")
    checked: dict[str, str] = {}
    for key, value in sorted(labels.items()):
        if not isinstance(key, str) or not _LABEL_KEY.fullmatch(key):
            raise UsageError(
                "invalid_labels", f"{what}: {key!r} is no label name (letters, digits, '.', '_', '-'; 63 at most)"
            )
        if not isinstance(value, str) or not _LABEL_VALUE.fullmatch(value):
            raise UsageError(
                "invalid_labels",
                f"{what}: the value of {key!r} must be 1 to 63 letters, digits, '.', '_' or '-', not {value!r}",
            )
        checked[key] = value
    return checked


def parse_labels(given: str | Iterable[str] | None, what: str = "--labels") -> dict[str, str]:
    """``k=v,k2=v2`` (or several such strings) as labels, or ``invalid_labels``."""
    if given is None:
        return {}
    parts = [given] if isinstance(given, str) else list(given)
    labels: dict[str, str] = {}
    for item in (piece.strip() for part in parts for piece in part.split(",")):
        if not item:
            continue
        key, equals, value = item.partition("=")
        if not equals:
            raise UsageError("invalid_labels", f"{what}: {item!r} is not NAME=VALUE")
        if key in labels and labels[key] != value:
            raise UsageError("invalid_labels", f"{what}: {key!r} given twice")
        labels[key] = value
    return check_labels(labels, what)


def check_priority(priority: Any, what: str = "priority") -> int:
    """A run's priority (None: :data:`DEFAULT_PRIORITY`), or ``invalid_priority``."""
    if priority is None:
        return DEFAULT_PRIORITY
    if isinstance(priority, bool) or not isinstance(priority, int) or not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise UsageError(
            "invalid_priority",
            f"{what}: an integer from {MIN_PRIORITY} (dequeued first) to {MAX_PRIORITY}, not {priority!r}",
        )
    return priority


def queue_name(labels: Mapping[str, str]) -> str:
    """The DBOS queue of a label set: :data:`FLEET_QUEUE` for none, else
    ``baton-fleet[k=v,k2=v2]`` (keys sorted), the same in every process."""
    if not labels:
        return FLEET_QUEUE
    return FLEET_QUEUE + "[" + ",".join(f"{key}={labels[key]}" for key in sorted(labels)) + "]"


def served_queues(labels: Mapping[str, str]) -> list[str]:
    """The queues a worker with ``labels`` takes runs from: one per subset of its labels (the
    unlabelled queue first), for a run may ask for fewer labels than its worker has."""
    keys = sorted(labels)
    return [
        queue_name({key: labels[key] for key in subset})
        for size in range(len(keys) + 1)
        for subset in itertools.combinations(keys, size)
    ]


def fleet_request(record: RunRecord) -> Mapping[str, Any] | None:
    """What a fleet run's worker clones and where it starts (``runs.request["fleet"]``); None for
    a run executed where it was started."""
    request = record.request
    found = request.get("fleet") if isinstance(request, Mapping) else None
    return found if isinstance(found, Mapping) else None


def run_labels(record: RunRecord) -> dict[str, str]:
    """The labels a fleet run asks its worker for (``runs.request["fleet"]["labels"]``)."""
    fleet = fleet_request(record)
    found = fleet.get("labels") if fleet is not None else None
    return {str(key): str(value) for key, value in found.items()} if isinstance(found, Mapping) else {}


def run_priority(record: RunRecord) -> int:
    """A fleet run's priority on the queue (:data:`DEFAULT_PRIORITY` when it named none)."""
    fleet = fleet_request(record)
    found = fleet.get("priority") if fleet is not None else None
    return found if isinstance(found, int) and not isinstance(found, bool) else DEFAULT_PRIORITY


def waiting_reason(labels: Mapping[str, str], offered: set[int], live: bool) -> str:
    """Why a queued fleet run waits: a live worker serves its queue (``offered``: the keys of the
    queues live workers serve, baton.store.queue_offers) and it waits for a slot; workers live
    but none has its labels; none lives."""
    if queue_key(queue_name(labels)) in offered:
        return WAITING
    return NO_LABELLED_WORKER if live and labels else NO_WORKER


def enqueue_options(
    settings: Settings,
    run_id: str,
    attempt: int,
    owner: str | None,
    *,
    labels: Mapping[str, str] | None = None,
    priority: int = DEFAULT_PRIORITY,
) -> dict[str, Any]:
    """DBOS's ``EnqueueOptions`` of one attempt of a fleet run: on its label set's queue, at its priority."""
    from baton.runs.workflows import APPLICATION_VERSION

    options: dict[str, Any] = {
        "workflow_name": FLEET_WORKFLOW,
        "queue_name": queue_name(labels or {}),
        "workflow_id": f"{run_id}:{attempt}",
        "app_version": APPLICATION_VERSION,
        "priority": priority,
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
