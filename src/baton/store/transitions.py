"""Which status a run may move into from which (docs/runs.md "Run status").

The store refuses any other change of ``runs.status`` with ``invalid_transition``
(``Store.update_run`` and ``LockedRun.update`` alike); writing the same status again is not a
transition (its reason and other fields change, nothing is recorded in ``run_transitions``).
Who moves a run, and in what order the log note and the row are written, is
:mod:`baton.runs.lifecycle`'s.

``interrupted`` is written only by the process that takes a run over from a dead executor;
a ``running`` run whose executor died is *shown* ``interrupted`` (derived, never written by the
dead process). An ended run (``finished``, ``failed``, ``cancelled``) never moves again: it
continues in a new run (``resumed_from``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from baton.errors import RefusedError
from baton.store.records import RUN_STATUSES

__all__ = ["RUN_TRANSITIONS", "check_transition"]

RUN_TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    # started by its executor; cancelled while it waited for a slot (``not_started``); failed on
    # the fleet worker that took it before it could start (its workspace could not be made)
    "queued": frozenset({"running", "cancelled", "failed"}),
    # paused on a gate (or parked); taken over from a dead executor; ended
    "running": frozenset({"paused", "interrupted", "finished", "failed", "cancelled"}),
    # a decided gate (or a resume); taken over; ended while waiting (a cancel, a parked run's cancel)
    "paused": frozenset({"running", "interrupted", "finished", "failed", "cancelled"}),
    # its new executor starts it; cancelled while it waited for a slot here
    "interrupted": frozenset({"running", "cancelled"}),
    "finished": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}
assert RUN_TRANSITIONS.keys() == RUN_STATUSES


def check_transition(run_id: str, current: str, new: str) -> None:
    """``invalid_transition`` unless a run in ``current`` may move into ``new`` (the same status is no move)."""
    if new == current or new in RUN_TRANSITIONS.get(current, frozenset()):
        return
    allowed = ", ".join(sorted(RUN_TRANSITIONS.get(current, ()))) or "none: it has ended"
    raise RefusedError(
        "invalid_transition",
        f"run {run_id} cannot move from {current} to {new} (from {current}: {allowed})",
        details={"run_id": run_id, "from": current, "to": new},
    )
