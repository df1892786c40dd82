"""Fencing a fleet run on a real Postgres (docs/fleet.md "Fencing"): once another executor has the
run, the old executor's row changes are refused and its log entries dropped; a run whose executor
took its lock again is not released by a scanner that saw the lock gone."""

from __future__ import annotations

import asyncio

import pytest

from baton.errors import RefusedError
from baton.store import Redactor, SessionLog, Store
from baton.store.liveness import ExecutorLock, executor_key
from baton.testing.postgres import TemporaryPostgres

OLD = "local:old-host:boot:101:1"
NEW = "local:new-host:boot:202:2"


async def test_the_old_executor_writes_nothing_once_another_has_the_run(postgres_server: TemporaryPostgres) -> None:
    url = postgres_server.create_schema()
    async with Store.open(url) as store, SessionLog(store, Redactor()) as log:
        record = await store.create_run(agent="command", executor_id=OLD)
        log.open_run(record.id)
        store.fence(record.id, OLD)
        log.fence(record.id, OLD)
        log.append(record.id, "baton", "_baton/one", {"n": 1})
        await log.flush()
        await store.update_run(record.id, status="running")  # still its executor: allowed
        # Released and taken by another executor (what a takeover does), behind the old one's back.
        assert await store.claim_run(record.id, expected_executor=OLD, executor_id=None)
        assert await store.claim_run(record.id, expected_executor=None, executor_id=NEW)
        log.append(record.id, "baton", "_baton/two", {"n": 2})
        await log.flush()
        assert log.lost(record.id)
        log.append(record.id, "baton", "_baton/three", {"n": 3})  # dropped at once
        await log.flush()
        with pytest.raises(RefusedError) as refused:
            await store.update_run(record.id, status="failed")
        assert refused.value.code == "run_taken_over" and NEW in refused.value.message
        entries = await log.read(record.id)
        assert [entry["method"] for entry in entries] == ["_baton/one"]
        assert (await store.get_run(record.id)).status == "running"
        store.lose(record.id)
        with pytest.raises(RefusedError):  # refused without asking the database
            await store.update_run(record.id, status_reason="anything")


async def test_a_run_whose_executor_took_its_lock_again_is_not_released(postgres_server: TemporaryPostgres) -> None:
    url = postgres_server.create_schema()
    async with Store.open(url) as store:
        record = await store.create_run(agent="command", executor_id=OLD)
        lock = ExecutorLock(url, OLD)
        await asyncio.to_thread(lock.acquire)
        try:
            assert await asyncio.to_thread(lock.held)
            # A scanner that read the lock as gone before it was taken again releases nothing.
            assert not await store.release_dead_run(record.id, OLD)
            assert not await asyncio.to_thread(lock.regain)  # its own session still holds it
        finally:
            await asyncio.to_thread(lock.release)
        assert not await asyncio.to_thread(lock.held)
        for _ in range(1000):  # the server ends the closed session a moment after the close
            if executor_key(OLD) not in await store.live_executor_keys():
                break
            await asyncio.sleep(0.01)
        assert await store.release_dead_run(record.id, OLD)
        assert (await store.get_run(record.id)).executor_id is None
        regained = ExecutorLock(url, OLD)
        assert await asyncio.to_thread(regained.regain)  # nobody holds it: taken on a new session
        try:
            assert await asyncio.to_thread(regained.held)
        finally:
            await asyncio.to_thread(regained.release)
