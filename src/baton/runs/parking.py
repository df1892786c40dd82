"""Waiting for a gate decision, parking a run, and resuming it on decision (docs/design.md "Gates, precisely").

A gate first waits **in-process**: the agent stays blocked in its permission request while
:func:`wait_for_decision` waits for the gate's row to be decided. A decision made in this
process wakes the waiter directly (:func:`wake_local`, what ``GateLedger.decide``'s callers
in this process use); one made in another process arrives as an inbox command
``gate_decision {gate_id}``, which the run's :class:`~baton.runs.inbox.InboxReader` hands to
:func:`wake_local` too. Either way the waiter then reads the decided gate from the ledger, so
the ledger row is the only truth; the wake-up is only about latency.

After the grace period the run **parks**: the agent is stopped, the run stays ``paused`` and
no executor holds it — a parked run is only its rows (the run, its log, its gates). Whoever
wants it to go on (``baton run`` waiting through parks, ``baton resume``, a worker) waits with
:func:`wait_for_decision` without a timeout and then resumes it (``Baton.resume``): the
continuation prompt names the decided calls (:func:`decided_calls`) and the host allows a
re-proposed call whose ``bound_input_hash`` matches an approved gate. That waiter is woken by
the inbox row the decision is recorded with (:func:`baton.store.wakeups.inbox_wakeups`: SQLite's
doorbell, Postgres' ``LISTEN``) and reads its gates only then, or every
``PARKED_FALLBACK_SECONDS`` (``PARKED_POLL_SECONDS`` while no wake-up can arrive).

These are plain async functions over the store, so a durable workflow can call them too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from baton.gates.ledger import GateLedger, GateRecord
from baton.store import Store
from baton.store.wakeups import Wakeup, inbox_wakeups

__all__ = [
    "DecidedCall",
    "decided_calls",
    "pending_gates",
    "wait_for_decision",
    "wait_for_decisions",
    "wake_local",
    "watch_gate",
]

PARKED_POLL_SECONDS: Final = 0.05  # a parked run's waiter reads its gates this often while no wake-up can arrive
PARKED_FALLBACK_SECONDS: Final = 5.0  # … and this often when one can (a wake-up lost)
_IN_PROCESS_POLL_SECONDS: Final = 0.5  # an in-process waiter re-reads its gate this often (a lost wake-up)

_waiters: dict[str, set[asyncio.Event]] = {}
_decided: dict[str, GateRecord] = {}  # decisions made here, handed to the waiter with its wake-up


def wake_local(gate_id: str, decided: GateRecord | None = None) -> None:
    """A decision for ``gate_id`` was recorded: wake whoever waits for it in this process.

    ``decided``: the gate as ``GateLedger.decide`` returned it; the waiter then answers the
    agent without reading it back from the store (the in-process path of the benchmark).
    """
    waiting = _waiters.get(gate_id)
    if not waiting:
        return
    if decided is not None and decided.id == gate_id and decided.status != "pending":
        _decided[gate_id] = decided
    for event in tuple(waiting):
        event.set()


@contextlib.contextmanager
def watch_gate(gate_id: str) -> Iterator[asyncio.Event]:
    """An event set by :func:`wake_local` for ``gate_id`` while the block runs."""
    event = asyncio.Event()
    _waiters.setdefault(gate_id, set()).add(event)
    try:
        yield event
    finally:
        found = _waiters.get(gate_id)
        if found is not None:
            found.discard(event)
            if not found:
                del _waiters[gate_id]
                _decided.pop(gate_id, None)


async def wait_for_decision(
    store: Store,
    run_id: str,
    gate_id: str,
    *,
    within: float | None,
    stop: asyncio.Event | None = None,
    poll_seconds: float = _IN_PROCESS_POLL_SECONDS,
    wakeup: Wakeup | None = None,
    fallback_seconds: float = PARKED_FALLBACK_SECONDS,
) -> GateRecord | None:
    """The gate once it is no longer pending, or None after ``within`` s (or when ``stop`` is set).

    A gate whose ``expires_at`` passes while waiting is expired here (a denial with reason
    ``timeout``), so a waiter never outlives its gate. ``wakeup``: inbox wake-ups (another
    process's decision); while it is live the gate is read on each and every
    ``fallback_seconds``, else every ``poll_seconds``.
    """
    ledger = GateLedger(store)
    loop = asyncio.get_running_loop()
    deadline = None if within is None else loop.time() + within
    with watch_gate(gate_id) as woken:
        while True:
            woken.clear()  # before the read: a wake-up during it is seen by the next wait
            if wakeup is not None:
                wakeup.event.clear()
            handed = _decided.pop(gate_id, None)
            gate = handed if handed is not None else await ledger.get(gate_id)
            if gate.status != "pending":
                return gate
            if stop is not None and stop.is_set():
                return None
            wait = fallback_seconds if wakeup is not None and wakeup.live else poll_seconds
            expires_in = _seconds_until(gate.expires_at)
            if expires_in is not None:
                if expires_in <= 0:
                    await ledger.expire_due(run_id)
                    continue
                wait = min(wait, expires_in)
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    return None
                wait = min(wait, left)
            await _first_set((woken, stop, None if wakeup is None else wakeup.event), wait)


async def pending_gates(store: Store, run_id: str) -> list[GateRecord]:
    """The run's pending gates, after expiring the ones past their ``expires_at``."""
    ledger = GateLedger(store)
    await ledger.expire_due(run_id)
    return await ledger.list(run_id=run_id, status="pending")


async def wait_for_decisions(
    store: Store,
    run_id: str,
    *,
    poll_seconds: float = PARKED_POLL_SECONDS,
    stop: asyncio.Event | None = None,
    fallback_seconds: float = PARKED_FALLBACK_SECONDS,
) -> bool:
    """Wait until the parked run has no pending gate (every one decided or expired); False if ``stop`` was set."""
    async with inbox_wakeups(store, run_id) as wakeup:
        while True:
            pending = await pending_gates(store, run_id)
            if not pending:
                return True
            for gate in pending:
                decided = await wait_for_decision(
                    store,
                    run_id,
                    gate.id,
                    within=None,
                    stop=stop,
                    poll_seconds=poll_seconds,
                    wakeup=wakeup,
                    fallback_seconds=fallback_seconds,
                )
                if decided is None:
                    return False


@dataclass(frozen=True)
class DecidedCall:
    """A call whose gate was decided while the run was parked: the continuation prompt names it."""

    gate_id: str
    tool_call_id: str | None
    tool_name: str | None
    summary: str
    status: str  # approved, denied, answered, expired
    decision: str  # approve, deny, answer, …
    reason: str
    interrupt: bool


async def decided_calls(store: Store, run_id: str, paused_on: str | None) -> list[DecidedCall]:
    """The gates decided since the run stopped waiting in a process: ``paused_on`` (the run's
    ``status_reason`` while it was paused: the gate it waited for) and the gates opened after
    it, decided and not used by a call yet; oldest first."""
    if not paused_on or not paused_on.startswith("gate_"):
        return []
    gates = sorted(await GateLedger(store).list(run_id=run_id), key=lambda gate: (gate.created_at, gate.id))
    since = next((gate.created_at for gate in gates if gate.id == paused_on), None)
    found = []
    for gate in gates:
        decision = gate.decision or {}
        if since is None or gate.created_at < since:
            continue
        if gate.status in ("pending", "superseded") or decision.get("used_by_call_id"):
            continue
        if gate.kind == "resource_limit":  # no call: the budget is applied or ends the run (baton.runs.budgeting)
            continue
        found.append(
            DecidedCall(
                gate_id=gate.id,
                tool_call_id=gate.tool_call_id,
                tool_name=gate.tool_name,
                summary=gate.summary,
                status=gate.status,
                decision=str(decision.get("decision") or gate.status),
                reason=str(decision.get("reason") or ""),
                interrupt=decision.get("interrupt") is True,
            )
        )
    return found


def _seconds_until(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - datetime.now(UTC)).total_seconds()


async def _first_set(events: tuple[asyncio.Event | None, ...], seconds: float) -> None:
    waits = [asyncio.ensure_future(event.wait()) for event in events if event is not None]
    try:
        await asyncio.wait(waits, timeout=max(seconds, 0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
