"""Adopting runs whose executor died and which have work (docs/design.md "Runs across processes").

``baton worker`` and ``baton serve`` scan the store every ``interval`` seconds for runs that
no live process executes (``queued``, ``running``, ``paused`` or ``interrupted`` with a dead
executor: :func:`~baton.runs.executors.executor_alive`, so a SIGKILLed process's runs qualify
at once) and that have something to do:

- a ``queued`` run: its process died before it started; it starts from its beginning (its
  spec is ``runs.request``; a run recorded without one is left alone),
- an inbox command no process has taken (a user message, a cancel, a gate decision), or
- a ``paused`` run whose gates are all decided (none pending, at least one approved, denied or
  answered). A paused run with a gate pending is never a candidate, whatever its inbox holds:
  it cannot go on before the decision (``run_paused``), and a cancel ends it by itself
  (:mod:`baton.runs.cancelling`).

Each is continued in this process through ``Baton.resume`` (the continuation prompt; the
compare-and-set on ``runs.executor_id`` lets one adopter win), while this process executes
fewer runs than its concurrency limit. A run whose workspace another live run holds is left
for later (``workspace_busy``). A run with no work stays interrupted until ``baton resume``.
A fleet run (baton.runs.fleet) is left to the fleet's queue unless it is parked.

Work that another process records arrives as an inbox row (a command; a gate decision is
recorded with one), which wakes the adopter at once (:func:`baton.store.wakeups.inbox_wakeups`);
the scan every ``interval`` is for what nothing announces: a process that died. A run found
with no work (or refused, other than ``workspace_busy``) is not looked at again until a wake-up
or until its status or executor changes, so a home full of interrupted runs costs one listing a
scan.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from baton.errors import BatonError
from baton.gates.ledger import GateLedger
from baton.runs.executors import executor_alive
from baton.runs.fleet import fleet_request
from baton.runs.spec import spec_of_request
from baton.store import Store
from baton.store.records import RunRecord
from baton.store.wakeups import inbox_wakeups

if TYPE_CHECKING:
    from baton.runs.api import Baton

__all__ = ["ADOPTABLE_STATUSES", "Adopter", "has_work"]

ADOPTABLE_STATUSES: Final = ("queued", "running", "paused", "interrupted")
_DECIDED: Final = frozenset({"approved", "denied", "answered"})


async def has_work(store: Store, record: RunRecord) -> bool:
    """Whether the run has something to do: its start (queued, with its request), an untaken inbox
    command, or decided gates and none pending."""
    if record.status == "queued":
        return spec_of_request(record) is not None
    if record.status != "paused":
        return bool(await store.inbox_pending(record.id))
    gates = await GateLedger(store).list(run_id=record.id)
    if any(gate.status == "pending" for gate in gates):
        return False  # nothing can go on before the decision (a cancel ends a parked run itself)
    return any(gate.status in _DECIDED for gate in gates) or bool(await store.inbox_pending(record.id))


class Adopter:
    """Finds adoptable runs and continues them in ``baton``'s process, within its limit."""

    def __init__(self, baton: Baton, *, interval: float = 1.0, report: Callable[[str], None] | None = None) -> None:
        self._baton = baton
        self._interval = interval
        self._report = report or (lambda line: sys.stderr.write(line + "\n"))
        self.adopted: list[str] = []
        self._refused: dict[str, str] = {}  # run → the code last reported: a refusal is said once, not every scan
        # Runs looked at and left (no work, or refused): not again until a wake-up or a change.
        self._left: dict[str, tuple[str, str | None]] = {}

    async def candidates(self) -> list[RunRecord]:
        """Runs with a dead executor and work to do, oldest first."""
        store = self._baton.store
        found = []
        for record in await store.list_runs(status=ADOPTABLE_STATUSES):  # one query a scan
            if executor_alive(record.executor_id, record.heartbeat_at):
                continue
            if record.status != "paused" and fleet_request(record) is not None:
                continue  # the fleet's queue starts and continues it (baton.runs.fleet)
            if self._left.get(record.id) == (record.status, record.executor_id):
                continue
            if await has_work(store, record):
                found.append(record)
            else:
                self._leave(record)
        found.sort(key=lambda record: record.created_at)
        return found

    def _leave(self, record: RunRecord) -> None:
        self._left[record.id] = (record.status, record.executor_id)

    async def scan(self) -> list[str]:
        """One pass: adopt what fits under the limit; the ids adopted."""
        candidates = await self.candidates()
        if not candidates:
            return []
        runtime = await self._baton.runtime()  # DBOS launches with the first run adopted
        adopted = []
        for record in candidates:
            if len(runtime.executing) >= self._baton.concurrency:
                break
            if record.id in runtime.executing:
                continue
            try:
                handle = await self._baton.resume(record.id)
            except BatonError as exc:  # another adopter won (run_active), or the workspace is busy
                if self._refused.get(record.id) != exc.code:
                    self._refused[record.id] = exc.code
                    self._report(f"baton: not adopting run {record.id}: {exc.code}: {exc.message}")
                if exc.code != "workspace_busy":  # that one frees when the other run ends: no wake-up
                    self._leave(record)
                continue
            self._refused.pop(record.id, None)
            adopted.append(handle.run_id)
            self.adopted.append(handle.run_id)
            self._report(f"baton: adopted run {handle.run_id} ({record.status}, executor {record.executor_id} gone)")
        return adopted

    async def run(self, stop: asyncio.Event) -> None:
        """Scan until ``stop`` is set: every ``interval``, and at once on an inbox wake-up."""
        async with inbox_wakeups(self._baton.store) as wakeup:
            while not stop.is_set():
                if wakeup.event.is_set():  # new inbox rows: every run may have work now
                    wakeup.event.clear()
                    self._left.clear()
                try:
                    await self.scan()
                except BatonError as exc:
                    self._report(f"baton: adoption scan failed: {exc.code}: {exc.message}")
                await _first(stop, wakeup.event, self._interval)


async def _first(one: asyncio.Event, other: asyncio.Event, seconds: float) -> None:
    waits = [asyncio.ensure_future(one.wait()), asyncio.ensure_future(other.wait())]
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
