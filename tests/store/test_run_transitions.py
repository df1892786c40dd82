"""The store's run status table (baton.store.transitions): every allowed move is taken, every other refused."""

from __future__ import annotations

import itertools

import pytest

from baton.errors import RefusedError
from baton.store import RUN_STATUSES, Store
from baton.store.records import RunRecord
from baton.store.store import LockedRun
from baton.store.transitions import RUN_TRANSITIONS

pytestmark = pytest.mark.timeout(60)

# How a new run reaches each status by allowed moves.
_PATHS = {
    "queued": (),
    "running": ("running",),
    "paused": ("running", "paused"),
    "interrupted": ("running", "interrupted"),
    "finished": ("running", "finished"),
    "failed": ("running", "failed"),
    "cancelled": ("running", "cancelled"),
}
_MOVES = [(old, new) for old, new in itertools.product(sorted(RUN_STATUSES), repeat=2) if old != new]
_ILLEGAL = [(old, new) for old, new in _MOVES if new not in RUN_TRANSITIONS[old]]


async def _run_in(store: Store, status: str) -> RunRecord:
    run = await store.create_run(agent="claude")
    for step in _PATHS[status]:
        run = await store.update_run(run.id, status=step, status_reason="test")
    assert run.status == status
    return run


def test_the_table_has_every_status_and_ended_runs_never_move() -> None:
    assert RUN_TRANSITIONS.keys() == RUN_STATUSES
    assert all(new in RUN_STATUSES for moves in RUN_TRANSITIONS.values() for new in moves)
    assert RUN_TRANSITIONS["finished"] == RUN_TRANSITIONS["failed"] == RUN_TRANSITIONS["cancelled"] == frozenset()
    assert len(_ILLEGAL) == 27  # 42 moves between 7 statuses, 15 allowed


@pytest.mark.parametrize(("old", "new"), _ILLEGAL)
async def test_an_illegal_transition_is_refused_and_changes_nothing(store: Store, old: str, new: str) -> None:
    run = await _run_in(store, old)
    before = await store.list_transitions(run.id)
    with pytest.raises(RefusedError) as refused:
        await store.update_run(run.id, status=new, status_reason="illegal", owner="mallory")
    assert refused.value.code == "invalid_transition"
    assert refused.value.details == {"run_id": run.id, "from": old, "to": new}
    after = await store.get_run(run.id)
    assert (after.status, after.owner) == (old, None)  # the whole update was refused
    assert await store.list_transitions(run.id) == before


@pytest.mark.parametrize(("old", "new"), _ILLEGAL)
async def test_an_illegal_transition_under_the_run_lock_is_refused(store: Store, old: str, new: str) -> None:
    run = await _run_in(store, old)

    def move(locked: LockedRun) -> None:
        locked.append("baton", "_baton/status", {"jsonrpc": "2.0", "method": "_baton/status"})
        locked.update(status=new, status_reason="illegal")

    with pytest.raises(RefusedError) as refused:
        await store.with_locked_run(run.id, move)
    assert refused.value.code == "invalid_transition"
    assert (await store.get_run(run.id)).status == old
    assert await store.log_position(run.id) == 0  # the note went with the refused transaction


@pytest.mark.parametrize(("old", "new"), [(old, new) for old, new in _MOVES if new in RUN_TRANSITIONS[old]])
async def test_an_allowed_transition_is_recorded(store: Store, old: str, new: str) -> None:
    run = await _run_in(store, old)
    moved = await store.update_run(run.id, status=new, status_reason="allowed")
    assert moved.status == new
    last = (await store.list_transitions(run.id))[-1]
    assert (last.from_status, last.to_status, last.reason) == (old, new, "allowed")


async def test_the_same_status_again_is_no_transition(store: Store) -> None:
    for status in sorted(RUN_STATUSES):
        run = await _run_in(store, status)
        before = await store.list_transitions(run.id)
        again = await store.update_run(run.id, status=status, status_reason="again")
        assert (again.status, again.status_reason) == (status, "again")
        assert await store.list_transitions(run.id) == before
