from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from sqlalchemy import text

from baton.errors import NotFoundError
from baton.events.entry import LogEntry
from baton.store import REDACTED, LogWriteError, Redactor, SessionLog, Store
from baton.store.committed import CommittedEntries, Row
from baton.store.engine import READ_ONLY, make_engine

pytestmark = pytest.mark.timeout(10)


def message(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"n": n}}


async def collect(log: SessionLog, run_id: str, after: int = 0) -> list[LogEntry]:
    async with contextlib.aclosing(log.subscribe(run_id, after)) as entries:
        return [entry async for entry in entries]


async def test_append_numbers_redacts_and_commits(log: SessionLog, run_id: str) -> None:
    first = log.append(run_id, "to_agent", "session/prompt", {"params": {"key": "canary-secret-1234"}})
    second = log.append(run_id, "from_agent", "session/prompt", {"result": {}})
    assert (first, second) == (1, 2)
    await log.wait_committed(run_id, second)
    entries = await log.read(run_id)
    assert [entry["seq"] for entry in entries] == [1, 2]
    assert entries[0]["payload"] == {"params": {"key": REDACTED}}
    assert entries[0]["ts"].endswith("Z") and entries[0]["direction"] == "to_agent"
    assert [entry["seq"] for entry in await log.read(run_id, after=1, until=1)] == []
    assert [entry["seq"] for entry in await log.read(run_id, after=0, until=1)] == [1]


async def test_a_lazy_read_holds_the_entries_of_a_read_and_decodes_them_as_they_are_iterated(
    log: SessionLog, run_id: str
) -> None:
    for n in range(30):
        log.append(run_id, "from_agent", "session/update", message(n))
    await log.flush()
    lazy = await log.read_lazily(run_id, after=5, until=25)
    assert len(lazy) == 20 and lazy.last_seq == 25
    first, again = list(lazy), list(lazy)
    assert first == again == await log.read(run_id, after=5, until=25)
    assert [entry["payload"]["params"]["n"] for entry in first] == list(range(5, 25))
    assert first[0]["payload"] is not again[0]["payload"]  # each iteration decodes anew
    assert len(await log.read_lazily(run_id)) == 30
    empty = await log.read_lazily(run_id, after=30)
    assert not empty and empty.last_seq is None and list(empty) == []
    with pytest.raises(NotFoundError) as missing:
        await log.read_lazily("run-nobody")
    assert missing.value.code == "run_not_found"


async def test_concurrent_appends_are_gapless(store: Store, log: SessionLog, run_id: str) -> None:
    other = (await store.create_run(agent="codex")).id
    log.open_run(other)

    async def producer(target: str, count: int) -> list[int]:
        seqs = []
        for n in range(count):
            seqs.append(log.append(target, "from_agent", "session/update", message(n)))
            if n % 7 == 0:
                await asyncio.sleep(0)
        return seqs

    results = await asyncio.gather(*(producer(run_id, 500) for _ in range(4)), producer(other, 300))
    await log.flush()
    assert sorted(seq for seqs in results[:4] for seq in seqs) == list(range(1, 2001))
    assert [entry["seq"] for entry in await log.read(run_id)] == list(range(1, 2001))
    assert [entry["seq"] for entry in await log.read(other)] == list(range(1, 301))


async def test_subscribe_replays_then_follows_without_gap_or_duplicate(log: SessionLog, run_id: str) -> None:
    for n in range(300):
        log.append(run_id, "from_agent", None, message(n))
    await log.flush()

    async def keep_appending() -> None:
        for n in range(300, 1500):
            log.append(run_id, "from_agent", None, message(n))
            if n % 50 == 0:
                await asyncio.sleep(0.001)
        log.close_run(run_id)

    subscribers = [asyncio.create_task(collect(log, run_id, after)) for after in (0, 150, 300)]
    await keep_appending()
    seen = await asyncio.gather(*subscribers)
    for after, entries in zip((0, 150, 300), seen, strict=True):
        assert [entry["seq"] for entry in entries] == list(range(after + 1, 1501))
        assert entries[-1]["payload"] == message(1499)


async def test_subscribers_see_entries_only_once_committed(store_url: str, log: SessionLog, run_id: str) -> None:
    checked = 0
    engine = make_engine(store_url)
    with engine.connect().execution_options(**READ_ONLY) as outsider:
        follower = asyncio.create_task(collect(log, run_id))
        for n in range(200):
            log.append(run_id, "from_agent", None, message(n))
            if n % 20 == 0:
                await asyncio.sleep(0.002)
        log.close_run(run_id)
        async with contextlib.aclosing(log.subscribe(run_id)) as entries:
            async for entry in entries:
                # Read by another connection at the moment of delivery: it must be on disk.
                row = outsider.execute(text("SELECT 1 FROM log_entries WHERE seq = :seq"), {"seq": entry["seq"]})
                assert row.one_or_none() is not None
                outsider.rollback()  # a fresh snapshot for the next read
                checked += 1
        assert len(await follower) == checked == 200
    engine.dispose()


async def test_close_run_ends_subscribers_and_refuses_appends(log: SessionLog, run_id: str) -> None:
    log.append(run_id, "baton", "_baton/status", message(1))
    task = asyncio.create_task(collect(log, run_id))
    await asyncio.sleep(0.01)
    log.append(run_id, "baton", "_baton/status", message(2))
    log.close_run(run_id)
    assert [entry["seq"] for entry in await task] == [1, 2]
    with pytest.raises(RuntimeError):
        log.append(run_id, "baton", None, message(3))
    assert [entry["seq"] for entry in await collect(log, run_id, after=1)] == [2]


async def test_a_run_continues_its_seq_in_a_new_session_log(store_url: str) -> None:
    async with Store.open(store_url) as store:
        run_id = (await store.create_run(agent="claude")).id
        async with SessionLog(store, Redactor()) as log:
            log.open_run(run_id)
            for n in range(5):
                log.append(run_id, "from_agent", None, message(n))
    async with Store.open(store_url) as store, SessionLog(store, Redactor()) as log:
        log.open_run(run_id)
        assert log.append(run_id, "baton", "_baton/resume", message(5)) == 6
        await log.flush()
        assert [entry["seq"] for entry in await log.read(run_id)] == [1, 2, 3, 4, 5, 6]


async def test_a_run_not_held_is_replayed_and_ends(store: Store, log: SessionLog, run_id: str) -> None:
    for n in range(3):
        log.append(run_id, "from_agent", None, message(n))
    log.close_run(run_id)
    await log.flush()
    async with SessionLog(store, Redactor()) as reader:
        assert [entry["seq"] for entry in await collect(reader, run_id)] == [1, 2, 3]
        with pytest.raises(NotFoundError):
            await collect(reader, "run_missing")
        with pytest.raises(NotFoundError):
            reader.open_run("run_missing")


async def test_a_failing_write_surfaces(store: Store) -> None:
    run_id = (await store.create_run(agent="claude")).id
    with store.engine.begin() as connection:
        if connection.dialect.name == "sqlite":
            connection.exec_driver_sql(
                "CREATE TRIGGER refuse BEFORE INSERT ON log_entries BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
            )
        else:
            connection.exec_driver_sql(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql"
                " AS $$ BEGIN RAISE EXCEPTION 'disk says no'; END $$"
            )
            connection.exec_driver_sql(
                "CREATE TRIGGER refuse BEFORE INSERT ON log_entries FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
    try:
        log = SessionLog(store, Redactor())
        await log.__aenter__()
        log.open_run(run_id)
        seq = log.append(run_id, "baton", None, message(1))
        with pytest.raises(LogWriteError, match="disk says no"):
            await log.wait_committed(run_id, seq)
        with pytest.raises(LogWriteError):
            await log.flush()
        with pytest.raises(LogWriteError):
            log.append(run_id, "baton", None, message(2))
        with pytest.raises(LogWriteError):
            await log.aclose()
        await log.aclose()  # idempotent
    finally:  # the Postgres schema is shared by the tests that follow
        with store.engine.begin() as connection:
            connection.exec_driver_sql(
                "DROP TRIGGER refuse" + (" ON log_entries" if connection.dialect.name != "sqlite" else "")
            )
            if connection.dialect.name != "sqlite":
                connection.exec_driver_sql("DROP FUNCTION refuse()")


async def test_lifecycle(store: Store, run_id: str) -> None:
    log = SessionLog(store, Redactor())
    with pytest.raises(RuntimeError):
        log.open_run(run_id)
    async with log:
        log.open_run(run_id)
        log.open_run(run_id)  # already open: nothing changes
        log.append(run_id, "baton", None, message(1))
    await log.aclose()
    with pytest.raises(RuntimeError):
        await log.__aenter__()
    with pytest.raises(RuntimeError):
        log.append(run_id, "baton", None, message(2))
    assert [entry["seq"] for entry in await log.read(run_id)] == [1]  # aclose committed it


async def test_drain_bounds_the_backlog(store: Store, run_id: str) -> None:
    async with SessionLog(store, Redactor(), max_pending=100, max_batch=10, commit_interval=0) as log:
        log.open_run(run_id)
        for n in range(1000):
            log.append(run_id, "from_agent", None, message(n))
            await log.drain()
        await log.flush()
        assert len(await log.read(run_id)) == 1000


async def test_a_slow_subscriber_falls_back_to_the_store(log: SessionLog, run_id: str) -> None:
    from baton.store._runlog import SUBSCRIBER_BUFFER

    log.append(run_id, "from_agent", None, message(0))
    entries = log.subscribe(run_id)
    async with contextlib.aclosing(entries):
        first = await anext(entries)  # now live, and not reading
        for n in range(1, SUBSCRIBER_BUFFER + 500):
            log.append(run_id, "from_agent", None, message(n))
        await log.flush()
        log.close_run(run_id)
        rest = [entry["seq"] async for entry in entries]
    assert [first["seq"], *rest] == list(range(1, SUBSCRIBER_BUFFER + 501))


async def test_a_stalled_disk_blocks_the_producer_not_memory(store_url: str, store: Store, run_id: str) -> None:
    max_pending = 200
    outsider = make_engine(store_url).connect()
    stall = outsider.begin()  # on SQLite, BEGIN IMMEDIATE: the writer cannot begin
    if outsider.dialect.name == "postgresql":
        outsider.exec_driver_sql("LOCK TABLE log_entries IN SHARE ROW EXCLUSIVE MODE")  # COPY waits
    async with SessionLog(store, Redactor(), max_pending=max_pending, max_batch=50, commit_interval=0) as log:
        log.open_run(run_id)
        most_pending = 0

        async def produce() -> None:
            nonlocal most_pending
            for n in range(2000):
                log.append(run_id, "from_agent", None, message(n))
                most_pending = max(most_pending, log.pending)
                await log.drain()

        producer = asyncio.create_task(produce())
        await asyncio.sleep(0.3)
        assert not producer.done()  # blocked in drain(), not queueing without end
        assert log.pending == max_pending + 1
        stall.rollback()
        await producer
        await log.flush()
        assert log.pending == 0
        assert most_pending == max_pending + 1
        assert [entry["seq"] for entry in await log.read(run_id)] == list(range(1, 2001))
    outsider.close()
    outsider.engine.dispose()


async def test_a_group_committed_twice_changes_nothing(store: Store, log: SessionLog, run_id: str) -> None:
    """A retried group (its first commit's outcome unknown) or a re-run step rewrites seqs that
    are stored: they are kept as they are, and the new ones are added (COPY falls back to the
    idempotent path on Postgres)."""
    from collections import deque

    from baton.store._writer import LogWriter, Queued

    for n in range(3):
        log.append(run_id, "from_agent", None, message(n))
    await log.flush()
    run = log._runs[run_id]
    again: deque[Queued] = deque(
        ((run.run_key, seq, "2026-11-30T00:00:00.000Z", "baton", None, f'{{"again":{seq}}}', None), run, {})
        for seq in (2, 3, 4, 5)
    )
    failures: list[BaseException] = []
    writer = LogWriter(
        store.engine,
        again,
        commit_interval=0,
        max_batch=10,
        on_commit=lambda batch, dropped: None,
        on_failure=failures.append,
    )
    writer.start()
    writer.stop()
    await asyncio.to_thread(writer.join)
    assert failures == []
    entries = await log.read(run_id)
    assert [entry["seq"] for entry in entries] == [1, 2, 3, 4, 5]
    assert [entry["payload"] for entry in entries] == [message(0), message(1), message(2), {"again": 4}, {"again": 5}]


async def test_the_writer_reconnects_when_postgres_drops_its_connection(store: Store, run_id: str) -> None:
    if store.engine.dialect.name != "postgresql":
        pytest.skip("not for this parameter: a SQLite file has no connection to lose")
    async with SessionLog(store, Redactor()) as log:
        log.open_run(run_id)
        log.append(run_id, "baton", None, message(1))
        await log.flush()
        with store.engine.begin() as connection:  # the writer is the other session on this database
            terminated = connection.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle'"
                " AND application_name = ''"
            ).all()
        assert terminated  # SQLAlchemy sees the disconnect on the rollback and reconnects
        for n in range(2, 6):
            log.append(run_id, "baton", None, message(n))
        await log.flush()
        assert [entry["seq"] for entry in await log.read(run_id)] == [1, 2, 3, 4, 5]


async def test_the_commit_observer_sees_each_committed_entry_once_in_order_redacted(
    log: SessionLog, run_id: str
) -> None:
    seen: list[LogEntry] = []
    rows: list[Row] = []
    notable: list[LogEntry] = []

    def observe(committed: CommittedEntries) -> None:
        assert list(committed.run_ids.values()) == [run_id]
        seen.extend(committed)
        rows.extend(committed.rows())
        notable.extend(committed.without_message_chunks())

    log.observe_commits(observe)
    for n in range(50):
        payload = {**message(n), "secret": "canary-secret-1234"}
        if n % 5 == 0:  # an agent's message chunk: what a trace or a metric need not see
            text = f"chunk {n} canary-secret-1234"
            update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
            payload = {"method": "session/update", "params": {"update": update}}
        log.append(run_id, "to_agent", "session/update" if n % 5 == 0 else "m", payload)
    await log.flush()
    assert [entry["seq"] for entry in seen] == list(range(1, 51))
    assert all("canary-secret-1234" not in json.dumps(entry["payload"]) for entry in seen)
    assert seen == await log.read(run_id)
    assert [row[1:5] for row in rows] == [(e["seq"], e["ts"], e["direction"], e["method"]) for e in seen]
    assert [json.loads(row[5]) for row in rows] == [entry["payload"] for entry in seen]  # the text as committed
    assert notable == [entry for entry in seen if entry["method"] == "m"]


async def test_an_observer_that_raises_costs_nothing_but_itself(log: SessionLog, run_id: str) -> None:
    def broken(committed: CommittedEntries) -> None:
        raise RuntimeError("the telemetry broke")

    log.observe_commits(broken)
    for n in range(5):
        log.append(run_id, "to_agent", "m", message(n))
    await log.flush()
    assert [entry["seq"] for entry in await log.read(run_id)] == [1, 2, 3, 4, 5]
