from __future__ import annotations

import re

import pytest

from baton.errors import NotFoundError, UsageError
from baton.store import Store, new_run_id

pytestmark = pytest.mark.timeout(10)

RUN_OBJECT_KEYS = {
    "id",
    "task_id",
    "agent",
    "model",
    "permission_mode",
    "run_mode",
    "status",
    "status_reason",
    "created_at",
    "finished_at",
    "total_cost_usd",
    "error_code",
    "error_message",
    "repo",
    "workspace",
}


def test_run_ids_are_prefixed_lowercase_and_sortable() -> None:
    ids = [new_run_id() for _ in range(50)]
    assert all(re.fullmatch(r"run_[0-9a-hjkmnp-tv-z]{26}", run_id) for run_id in ids)
    assert len(set(ids)) == 50
    assert ids[0][:14] <= ids[-1][:14]  # the leading characters are the creation time


async def test_create_get_and_list(store: Store) -> None:
    first = await store.create_run(agent="claude", model="sonnet", repo="/src/app", task_id="t1")
    second = await store.create_run(agent="codex", run_mode="interactive")
    assert first.status == "queued" and first.permission_mode == "default"
    assert await store.get_run(first.id) == first
    assert set(first.to_dict()) == RUN_OBJECT_KEYS
    assert first.to_dict()["repo"] == "/src/app"
    assert [run.id for run in await store.list_runs()] == [first.id, second.id]
    await store.update_run(second.id, status="running")
    assert [run.id for run in await store.list_runs(status="running")] == [second.id]


async def test_status_transitions_stamp_times(store: Store) -> None:
    run = await store.create_run(agent="claude")
    running = await store.update_run(run.id, status="running", agent_session_id="sess-1")
    assert running.started_at is not None and running.finished_at is None
    assert running.agent_session_id == "sess-1"
    done = await store.update_run(
        run.id, status="failed", status_reason="agent_exited", total_cost_usd=0.25, error_code="agent_exited"
    )
    assert (done.status, done.status_reason, done.total_cost_usd) == ("failed", "agent_exited", 0.25)
    assert done.finished_at is not None and done.started_at == running.started_at
    assert done.is_terminal


async def test_errors_carry_codes(store: Store) -> None:
    with pytest.raises(NotFoundError) as missing:
        await store.get_run("run_nope")
    assert missing.value.code == "run_not_found"
    with pytest.raises(NotFoundError):
        await store.update_run("run_nope", status="running")
    run = await store.create_run(agent="claude")
    with pytest.raises(UsageError) as bad_status:
        await store.update_run(run.id, status="exploded")
    assert bad_status.value.code == "invalid_argument"
    with pytest.raises(UsageError):
        await store.update_run(run.id, id="run_other")
    with pytest.raises(UsageError):
        await store.create_run(agent="claude", run_mode="sometimes")
    with pytest.raises(UsageError):
        await store.create_run(agent="claude", run_id=run.id)


def test_a_memory_database_is_refused() -> None:
    with pytest.raises(UsageError) as refused:
        Store.open("sqlite://")
    assert refused.value.code == "config_invalid"


def test_postgres_urls_use_psycopg_3() -> None:
    from baton.store.engine import make_engine

    for url in ("postgresql://baton@127.0.0.1/baton", "postgres://baton@127.0.0.1/baton"):
        engine = make_engine(url)  # no connection is made yet
        assert (engine.dialect.name, engine.dialect.driver) == ("postgresql", "psycopg")
        engine.dispose()
    with pytest.raises(UsageError) as refused:
        make_engine("mysql://baton@127.0.0.1/baton")
    assert refused.value.code == "config_invalid"


async def test_a_run_is_read_inline_on_a_sqlite_file_and_through_a_thread_on_postgres(store: Store) -> None:
    # GET /v1/runs/{id}: on a SQLite file the primary-key read skips the worker thread; either
    # way the record is the one the store's SQLAlchemy read gives, up to the latest write.
    inline = store._inline_reads()
    assert (inline is not None) == (store.engine.dialect.name == "sqlite")
    run = await store.create_run(agent="claude", model="sonnet", repo="/src/app", request={"n": 2**70})
    assert await store.get_run(run.id) == store._get_run(run.id) == run
    changed = await store.update_run(run.id, status="running", executor_id="local:x:1:2:3")
    read = await store.get_run(run.id)
    assert read == changed == store._get_run(run.id) and read.status == "running"
    assert type(read.request["n"]) is int  # type: ignore[index]
    with pytest.raises(NotFoundError) as missing:
        await store.get_run("run_nope")
    assert missing.value.code == "run_not_found"
    await store.aclose()
    assert store._inline is None
