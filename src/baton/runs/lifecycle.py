"""The one owner of a run's status: every transition, with its log note and its row in order.

docs/runs.md "Run status" is the contract; the store refuses a move its table does not allow
(``invalid_transition``, :mod:`baton.store.transitions`). Who writes a run's log:

- **its live executor** (:class:`RunLifecycle`, over the run's open
  :class:`~baton.store.log.SessionLog`): start, pause on a gate, the gate decided, park, end;
- **the store, under the run's lock in one short transaction**, when no live process executes
  the run (:func:`end_parked_locked`: a parked run's cancel): the note and the row commit
  together, numbered after the last committed entry, so two writers never number one run's
  entries at once;
- **nobody**, for the two moves a dead or absent executor cannot announce: a takeover writes
  ``interrupted`` on the row only (:func:`take_over`; the new executor's ``_baton/resume``
  says the rest), and a run cancelled before its execution started (``not_started``) has no
  log to write to (:func:`cancel_not_started`). A ``running`` run whose executor died is only
  *shown* ``interrupted`` (``effective_status``): nothing writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from baton.acp.extensions import StatusParams, notification
from baton.events.entry import utc_timestamp
from baton.store import SessionLog, Store
from baton.store.store import LockedRun

__all__ = ["Note", "RunLifecycle", "cancel_not_started", "end_parked_locked", "take_over"]

Note = Callable[[str, Any], int]  # ``_baton/<name>`` with its params into the run's log; its seq


class RunLifecycle:
    """The status of a run this process executes: each transition writes its note and its row."""

    def __init__(self, store: Store, log: SessionLog, run_id: str, note: Note) -> None:
        self._store = store
        self._log = log
        self._run_id = run_id
        self._note = note

    async def start(self, reason: str, executor_id: str, opening: Mapping[str, Any] | None = None) -> None:
        """``running`` (``started`` or ``resumed``): the row first — this executor's id is on the
        run before its first entry can be seen, so a resume never takes over a run that is just
        starting —, then ``opening`` (``run_started``, ``resume``: name → params) and
        ``_baton/status running``."""
        await self._store.update_run(
            self._run_id, status="running", status_reason=reason, started_at=utc_timestamp(), executor_id=executor_id
        )
        for name, params in (opening or {}).items():
            self._note(name, params)
        self._note("status", {"status": "running", "reason": reason})

    async def pause_on_gate(self, gate_id: str, opened: Mapping[str, Any]) -> None:
        """``paused`` on a gate while the executor waits: ``_baton/gate_opened``, then the row."""
        self._note("gate_opened", dict(opened))
        await self._store.update_run(self._run_id, status="paused", status_reason=gate_id)

    async def gate_decided(self) -> None:
        """Back to ``running`` once the gate it waited on is decided (its ``gate_resolved`` is the note)."""
        await self._store.update_run(self._run_id, status="running", status_reason="gate_decided")

    async def park(self, gate_id: str, total_cost_usd: float | None) -> None:
        """``paused``, parked: ``_baton/status paused`` committed, then the row without an executor."""
        self._note("status", {"status": "paused", "reason": "parked", "gate_id": gate_id})
        await self._log.flush()
        cost = {"total_cost_usd": total_cost_usd} if total_cost_usd is not None else {}
        await self._store.update_run(self._run_id, status="paused", status_reason=gate_id, executor_id=None, **cost)

    async def end(self, params: StatusParams, *, code: str | None, message: str | None) -> None:
        """``finished``, ``failed`` or ``cancelled``: the final ``_baton/status`` committed, then the row."""
        self._note("status", params)
        await self._log.flush()
        status = params["status"]
        await self._store.update_run(
            self._run_id,
            status=status,
            status_reason=params["reason"],
            finished_at=utc_timestamp(),
            total_cost_usd=params.get("total_cost_usd"),
            error_code=code,
            error_message=message if status == "failed" else None,
        )


async def take_over(store: Store, run_id: str, status: str) -> None:
    """A run claimed from a dead executor: ``interrupted`` (``executor_dead``) when it was
    ``running`` or ``paused`` (the row only: the dead executor cannot write its log)."""
    if status in ("running", "paused"):
        await store.update_run(run_id, status="interrupted", status_reason="executor_dead")


async def cancel_not_started(store: Store, run_id: str) -> None:
    """A run queued for a slot here that never started: ``cancelled`` (``not_started``)."""
    await store.update_run(run_id, status="cancelled", status_reason="not_started", finished_at=utc_timestamp())


def end_parked_locked(locked: LockedRun, ending: dict[str, Any]) -> None:
    """A parked run (no live executor) ends ``cancelled`` inside ``Store.with_locked_run``: its
    ``_baton/status`` and its row in the same transaction."""
    _locked_note(locked, "status", ending)
    locked.update(status="cancelled", status_reason=ending.get("reason", "cancelled"), executor_id=None)


def _locked_note(locked: LockedRun, name: str, params: dict[str, Any]) -> None:
    message = notification(name, params)
    locked.append("baton", message["method"], message)
