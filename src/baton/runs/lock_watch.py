"""A fleet worker that loses its liveness lock stops its runs on its own (docs/fleet.md "Fencing").

Another worker takes over a run once the run's executor's advisory lock (baton.store.liveness)
is gone. The lock goes with its connection: when Postgres restarts, or when the network between
this worker and Postgres is cut and the server gives up the connection (10–11 s). A worker that
goes on executing then writes a run another worker may own. So every second :class:`LockWatch`
asks the lock's session whether it still holds the lock, and when no answer comes within
:data:`CHECK_TIMEOUT_SECONDS`:

1. this worker dequeues nothing more (a run dequeued now would be executed without a lock);
2. for :data:`REGAIN_SECONDS` it tries to take the lock again on a new connection (or hears the
   old session answer after all). Taken again: each fleet run executing here is checked with the
   compare-and-set on ``runs.executor_id`` (still this executor's?); those that are not are
   stopped, the others go on;
3. not taken again in time: every fleet run executing here is stopped — never fail open. It
   keeps trying, and dequeues again once it holds its lock.

Stopping a run: the store refuses its row changes and the session log drops its entries from
now on (``Store.lose``, ``SessionLog.lose``), its processes are SIGKILLed, then its execution
unwinds (writing nothing). The run is left to the worker that takes it over.

The bound: a cut is noticed after at most 1 + 5 s and the run is stopped by 1 + 5 + 3 = 9 s,
before the server gives up the lock's connection (idle: 5 + 3 × 2 = 11 s after the last packet
it received, the last check at most a second before the cut: ≥ 10 s) and a scanner then finds
it gone on two scans (≥ 1 s more). What the order of events cannot exclude, the fence does: a
row change checks the executor under the row's lock, a log commit under a share lock of the row.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final

from baton.agents.processes import kill_run_processes
from baton.store import SessionLog, Store
from baton.store.liveness import ExecutorLock

if TYPE_CHECKING:
    from baton.runs.workflows import DurableRuntime

__all__ = ["CHECK_SECONDS", "CHECK_TIMEOUT_SECONDS", "REGAIN_SECONDS", "LockWatch"]

CHECK_SECONDS: Final = 1.0
CHECK_TIMEOUT_SECONDS: Final = 5.0
REGAIN_SECONDS: Final = 3.0
_REGAIN_TRY_SECONDS: Final = 0.2


class LockWatch:
    """Watches this worker's executor lock and stops its fleet runs when it cannot keep it."""

    def __init__(
        self,
        lock: ExecutorLock,
        runtime: DurableRuntime,
        store: Store,
        log: SessionLog,
        *,
        report: Callable[[str], None] | None = None,
        interval: float = CHECK_SECONDS,
        check_timeout: float = CHECK_TIMEOUT_SECONDS,
        regain_seconds: float = REGAIN_SECONDS,
    ) -> None:
        self._lock = lock
        self._runtime = runtime
        self._store = store
        self._log = log
        self._report = report or (lambda line: sys.stderr.write(line + "\n"))
        self._interval = interval
        self._check_timeout = check_timeout
        self._regain_seconds = regain_seconds
        self._late: asyncio.Future[bool] | None = None  # the check that did not answer in time
        self.stopped: list[str] = []

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._interval)
            if stop.is_set():
                return
            try:
                await self.check()
            except Exception as exc:  # the watch never dies silently
                self._report(f"baton: liveness check failed: {type(exc).__name__}: {exc}")

    async def check(self) -> None:
        """One look: runs whose log was fenced stop; a lock that does not answer is taken again or
        its runs stop."""
        fenced = [run_id for run_id in self._runtime.fleet_runs if self._log.lost(run_id)]
        if fenced:
            await self._stop(fenced, "its log was fenced: another executor has it")
        if await self._confirmed():
            return
        lost_at = time.monotonic()
        self._runtime.hold_dequeues()
        self._report(f"baton: executor {self._lock.executor_id} lost its liveness lock; taking it again")
        while time.monotonic() - lost_at < self._regain_seconds:
            if await self._regained():
                await self._recheck_runs()
                self._runtime.resume_dequeues()
                return
            await asyncio.sleep(_REGAIN_TRY_SECONDS)
        running = sorted(self._runtime.fleet_runs)
        if running:
            await self._stop(running, f"the liveness lock was not taken again within {self._regain_seconds:g} s")
        while True:  # no deadline now: it dequeues again once it holds its lock
            if await self._regained():
                break
            await asyncio.sleep(self._interval)
        await self._recheck_runs()
        self._runtime.resume_dequeues()

    async def _confirmed(self) -> bool:
        """The lock's session answered that it holds the lock within the check's timeout."""
        if self._late is not None and not self._late.done():
            return False  # the previous check still hangs on its connection
        check = asyncio.ensure_future(asyncio.to_thread(self._lock.held))
        done, _ = await asyncio.wait({check}, timeout=self._check_timeout)
        if not done:
            self._late = check
            return False
        return check.result()

    async def _regained(self) -> bool:
        late = self._late
        if late is not None and late.done() and not late.cancelled() and late.exception() is None and late.result():
            self._late = None
            return True  # the old session answered after all: the lock never went
        try:
            taken = await asyncio.wait_for(asyncio.to_thread(self._lock.regain), self._check_timeout)
        except Exception:  # unreachable still, or the attempt hung
            return False
        if taken:
            self._late = None
            self._report(f"baton: executor {self._lock.executor_id} took its liveness lock again")
        return taken

    async def _recheck_runs(self) -> None:
        """With the lock held again: each fleet run still this executor's goes on, the others stop."""
        executor = self._lock.executor_id
        gone = [
            run_id
            for run_id in sorted(self._runtime.fleet_runs)
            if not await self._store.claim_run(run_id, expected_executor=executor, executor_id=executor)
        ]
        if gone:
            await self._stop(gone, "another executor took it over meanwhile")

    async def _stop(self, run_ids: Iterable[str], why: str) -> None:
        stopping = frozenset(run_ids)
        for run_id in sorted(stopping):
            self._store.lose(run_id)
            self._log.lose(run_id)
        self._runtime.lose(stopping)
        for run_id in sorted(stopping):
            await asyncio.to_thread(kill_run_processes, run_id)
            self.stopped.append(run_id)
            self._report(f"baton: run {run_id} stopped here: {why}")
        self._runtime.abort(stopping)
