"""One running run per workspace, claimed atomically in the store (``Store.create_run`` and
``Store.claim_run`` with ``exclusive``): threads, each with its own Store (its own engine and
connections, as separate processes have), race for one workspace on SQLite and on Postgres."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from baton.errors import RefusedError
from baton.store import RunRecord, Store

pytestmark = pytest.mark.timeout(60)

RACERS = 4
TRIALS = 8


def live(record: RunRecord) -> bool:
    """The test's liveness: executors named ``live…`` are alive, every other one is dead."""
    return (record.executor_id or "").startswith("live")


@pytest.fixture
def stores(store_url: str) -> Iterator[list[Store]]:
    opened = [Store.open(store_url) for _ in range(RACERS)]
    yield opened
    for store in opened:
        store.close()


def race(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` in threads released at the same instant; each one's result or exception."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def racer(index: int) -> None:
        barrier.wait()
        try:
            results[index] = calls[index]()
        except Exception as exc:  # the refusal is the result under test
            results[index] = exc

    threads = [threading.Thread(target=racer, args=(index,)) for index in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def start_in(store: Store, workspace: str, executor: str) -> Callable[[], RunRecord]:
    return lambda: asyncio.run(
        store.create_run(agent="claude", repo=workspace, cwd=workspace, executor_id=executor, exclusive=live)
    )


def busy(result: Any) -> bool:
    return isinstance(result, RefusedError) and result.code == "workspace_busy"


async def test_of_runs_started_at_once_in_one_workspace_exactly_one_is_recorded(stores: list[Store]) -> None:
    for trial in range(TRIALS):
        workspace = f"/work/ws-{trial}"
        results = race([start_in(store, workspace, f"live-{index}") for index, store in enumerate(stores)])
        [winner] = [result for result in results if isinstance(result, RunRecord)]
        losers = [result for result in results if not isinstance(result, RunRecord)]
        assert len(losers) == RACERS - 1 and all(busy(loser) for loser in losers), results
        assert all(loser.details == {"run_id": winner.id, "status": "queued"} for loser in losers)
        recorded = [run for run in await stores[0].list_runs() if run.repo == workspace]
        assert [run.id for run in recorded] == [winner.id]


async def test_a_run_whose_executor_died_holds_no_workspace(stores: list[Store]) -> None:
    store = stores[0]
    dead = await store.create_run(agent="claude", repo="/work/ws", executor_id="dead-1", exclusive=live)
    await store.update_run(dead.id, status="running")
    ended = await store.create_run(agent="claude", repo="/work/ws", executor_id="live-0", exclusive=live)
    await store.update_run(ended.id, status="cancelled")
    started = await store.create_run(agent="claude", repo="/work/ws", executor_id="live-1", exclusive=live)
    # Recorded with its executor and a first heartbeat (a remote executor is judged by it at once).
    assert (started.executor_id, started.heartbeat_at) == ("live-1", started.created_at)
    with pytest.raises(RefusedError) as refused:
        await store.create_run(agent="claude", repo="/work/ws", executor_id="live-2", exclusive=live)
    assert refused.value.code == "workspace_busy" and started.id in refused.value.message
    # Only the repository counts (cwd when a run has none), and without ``exclusive`` nothing is checked.
    await store.create_run(agent="claude", repo="/work/other", cwd="/work/ws", executor_id="live-3", exclusive=live)
    await store.create_run(agent="claude", repo="/work/ws", executor_id="live-4")


async def test_taking_over_a_dead_run_is_refused_while_another_run_holds_its_workspace(stores: list[Store]) -> None:
    store = stores[0]
    dead = await store.create_run(agent="claude", repo="/work/ws", executor_id="dead-1")
    await store.update_run(dead.id, status="running")
    holder = await store.create_run(agent="claude", repo="/work/ws", executor_id="live-1")
    with pytest.raises(RefusedError) as refused:
        await store.claim_run(dead.id, expected_executor="dead-1", executor_id="live-2", exclusive=live)
    assert refused.value.code == "workspace_busy" and refused.value.details["run_id"] == holder.id
    assert (await store.get_run(dead.id)).executor_id == "dead-1"  # nothing taken
    await store.update_run(holder.id, status="cancelled")
    assert await store.claim_run(dead.id, expected_executor="dead-1", executor_id="live-2", exclusive=live)
    assert not await store.claim_run(dead.id, expected_executor="dead-1", executor_id="live-3", exclusive=live)
    assert (await store.get_run(dead.id)).executor_id == "live-2"


async def test_of_processes_taking_over_one_dead_run_exactly_one_wins(stores: list[Store]) -> None:
    for trial in range(TRIALS):
        dead = await stores[0].create_run(agent="claude", repo=f"/work/ws-{trial}", executor_id=f"dead-{trial}")

        def claim(store: Store, executor: str, run_id: str = dead.id, expected: str = f"dead-{trial}") -> bool:
            return asyncio.run(
                store.claim_run(run_id, expected_executor=expected, executor_id=executor, exclusive=live)
            )

        results = race(
            [lambda store=store, index=index: claim(store, f"live-{index}") for index, store in enumerate(stores)]
        )
        assert sorted(results) == [False] * (RACERS - 1) + [True], results
        winner = f"live-{results.index(True)}"
        assert (await stores[0].get_run(dead.id)).executor_id == winner


async def test_a_take_over_and_a_start_racing_for_one_workspace_one_wins(stores: list[Store]) -> None:
    for trial in range(TRIALS):
        workspace = f"/work/ws-{trial}"
        dead = await stores[0].create_run(agent="claude", repo=workspace, executor_id="dead")

        def take_over(run_id: str = dead.id) -> bool:
            return asyncio.run(
                stores[1].claim_run(run_id, expected_executor="dead", executor_id="live-a", exclusive=live)
            )

        results = race([take_over, start_in(stores[2], workspace, "live-b")])
        claimed, started = results
        if claimed is True:
            assert busy(started), results
        else:
            assert isinstance(started, RunRecord) and busy(claimed), results
