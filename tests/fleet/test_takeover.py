"""The takeover scan (baton.runs.fleet.Takeover) on a real Postgres: a run of an executor whose
advisory lock is gone is released and enqueued again; one whose executor holds its lock is left;
an enqueue that fails gives the run back to its dead executor, so the next scan takes it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from baton.config import Settings
from baton.runs import Baton
from baton.runs.fleet import Takeover
from baton.store import Store
from baton.store.liveness import ExecutorLock
from baton.testing.postgres import TemporaryPostgres

DEAD = "local:gone-host:boot:101:1"
ALIVE = "local:live-host:boot:202:2"


async def test_a_dead_executors_run_is_enqueued_again_and_a_failed_enqueue_is_retried(
    postgres_server: TemporaryPostgres,
) -> None:
    url = postgres_server.create_schema()
    lock = ExecutorLock(url, ALIVE)
    await asyncio.to_thread(lock.acquire)
    try:
        async with Store.open(url) as store:
            fleet = {"fleet": {"repo": "file:///nowhere.git"}}
            dead = await store.create_run(agent="command", request=fleet, executor_id=DEAD, owner="ann")
            alive = await store.create_run(agent="command", request=fleet, executor_id=ALIVE)
            for record in (dead, alive):
                await store.update_run(record.id, status="running")
            reported: list[str] = []
            enqueued: list[tuple[str, str | None]] = []

            async def failing(run_id: str, owner: str | None) -> None:
                raise RuntimeError("the queue is unreachable")

            async def enqueue(run_id: str, owner: str | None) -> None:
                enqueued.append((run_id, owner))

            failing_scan = Takeover(store, failing, report=reported.append)
            assert await failing_scan.scan() == []  # gone on one scan: not yet taken
            assert reported == []
            assert await failing_scan.scan() == []
            assert (await store.get_run(dead.id)).executor_id == DEAD  # given back: not stranded
            assert any("RuntimeError: the queue is unreachable" in line for line in reported), reported

            scanner = Takeover(store, enqueue, report=reported.append)
            assert await scanner.scan() == []
            assert await scanner.scan() == [dead.id]
            assert enqueued == [(dead.id, "ann")]
            assert (await store.get_run(dead.id)).executor_id is None
            assert (await store.get_run(alive.id)).executor_id == ALIVE  # its lock is held
    finally:
        await asyncio.to_thread(lock.release)


async def test_a_worker_exposes_the_queue_depth_and_the_dispatch_latency(
    tmp_path: Path, postgres_server: TemporaryPostgres
) -> None:
    url = postgres_server.create_schema()
    settings = Settings.load({"BATON_HOME": str(tmp_path / "home"), "BATON_DATABASE_URL": url})
    async with Baton(settings, metrics=True) as baton:
        assert baton.telemetry is not None and baton.telemetry.metrics is not None
        metrics = baton.telemetry.metrics
        fleet = {"fleet": {"repo": "file:///nowhere.git"}}
        waiting = [await baton.store.create_run(agent="command", request=fleet) for _ in range(3)]
        await baton.store.create_run(agent="command")  # not a fleet run: not in the queue
        await Takeover(baton.store, lambda run_id, owner: asyncio.sleep(0), depth=metrics.queue_depth).scan()
        metrics.dispatched(waiting[0].created_at)
        found = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(baton.telemetry.metrics_text().decode())
            for sample in family.samples
        }
    assert found[("baton_queue_depth", ())] == 3
    assert found[("baton_dispatch_latency_seconds_count", ())] == 1
    assert found[("baton_dispatch_latency_seconds_sum", ())] >= 0
