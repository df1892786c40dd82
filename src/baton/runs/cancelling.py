"""Cancelling a run from any process: ``baton cancel``, JSON-RPC ``cancel``, ``Baton.cancel``.

A run that a live process executes is cancelled through its inbox: the process takes the
command (docs/runs.md), interrupts the turn, denies the gates it waits for and ends the run
``cancelled``. A **parked** run — ``paused`` on a gate, no live executor — has nobody to take
the command, so whoever cancels it ends it at once, in one transaction holding the run's row
lock (``Store.with_locked_run``): its pending gates are denied (``interrupt: true``, reason
``cancelled``, ``decided_by: "cancel"``), the command is marked taken, the log gets what an
executing run would have logged (``_baton/inbox``, a ``_baton/gate_resolved`` per gate, and
``_baton/status cancelled``: runner events ``gate.resolved`` and ``task.finished`` with
``stop_reason: "cancelled"``) and the run becomes ``cancelled``. A process waiting through
the park (``baton run``) wakes to the ended run and exits 5.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Final, Literal

from baton.acp.extensions import notification
from baton.agents.processes import kill_run_processes, run_process_ids
from baton.gates.ledger import cancel_denial
from baton.runs.executors import executor_alive
from baton.runs.inbox import post_command
from baton.runs.lifecycle import end_parked_locked
from baton.store import LockedRun, Store

__all__ = ["CANCELLED_BY", "Cancelled", "cancel_run", "end_parked"]

CANCELLED_BY: Final = "cancel"  # decided_by of the gates a cancel denies, taken_by of its inbox command


@dataclass(frozen=True)
class Cancelled:
    """The answer to a cancel: ``cancelled`` when the run ended here and now (it was parked),
    ``queued`` when the process executing it will end it."""

    run_id: str
    inbox_id: int
    status: Literal["queued", "cancelled"]

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "inbox_id": self.inbox_id}


async def cancel_run(store: Store, run_id: str, reason: str | None = None) -> Cancelled:
    """Cancel the run wherever it executes (``run_not_found``; ``run_not_running`` once ended)."""
    payload = {"reason": reason} if reason else {}
    inbox_id = await post_command(store, run_id, "cancel", payload)
    ended = await end_parked(store, run_id, inbox_id=inbox_id, payload=payload)
    return Cancelled(run_id, inbox_id, "cancelled" if ended else "queued")


async def end_parked(
    store: Store, run_id: str, *, inbox_id: int | None = None, payload: dict[str, Any] | None = None
) -> bool:
    """End a parked run ``cancelled`` (see the module); True too when a cancel ended it already,
    False when it is not parked (a live process executes it, or it is not ``paused``): nothing
    is changed then.

    ``inbox_id``: the cancel command posted for it, marked taken and logged with the ending.
    """

    def end(locked: LockedRun) -> bool:
        record = locked.record
        if record.status == "cancelled":  # another cancel ended it since this one was posted
            if inbox_id is not None:
                locked.take_inbox(inbox_id, CANCELLED_BY)
            return True
        if record.status != "paused" or executor_alive(record.executor_id, record.heartbeat_at):
            return False
        if inbox_id is not None:
            locked.take_inbox(inbox_id, CANCELLED_BY)
            _note(locked, "inbox", {"id": inbox_id, "kind": "cancel", "payload": payload or {}})
        for gate in locked.deny_pending_gates(cancel_denial(), CANCELLED_BY):
            _note(
                locked,
                "gate_resolved",
                {"gate_id": gate.id, "decision": "deny", "reason": "cancelled", "decided_by": CANCELLED_BY},
            )
        ending: dict[str, Any] = {"status": "cancelled", "reason": "cancelled", "stop_reason": "cancelled"}
        if record.total_cost_usd is not None:
            ending["total_cost_usd"] = record.total_cost_usd
        end_parked_locked(locked, ending)
        return True

    ended = await store.with_locked_run(run_id, end)
    if ended and run_process_ids(run_id):  # a process killed while its gate waited may leave its agent
        await asyncio.to_thread(kill_run_processes, run_id)
    return ended


def _note(locked: LockedRun, name: str, params: dict[str, Any]) -> None:
    message = notification(name, params)
    locked.append("baton", message["method"], message)
