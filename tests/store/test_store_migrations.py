from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from baton.errors import RefusedError
from baton.runs.conversation import rebuild_conversation
from baton.runs.resume import load_conversation
from baton.store import Redactor, SessionLog, Store
from baton.store.engine import make_engine
from baton.store.migrate import current_revision, declared_head, head_revision, upgrade
from baton.store.tables import metadata

pytestmark = pytest.mark.timeout(10)


def test_blank_database_migrates_to_head(blank_store_url: str) -> None:
    store = Store.open(blank_store_url)
    try:
        assert current_revision(store.engine) == head_revision()
        assert set(metadata.tables) | {"alembic_version"} == set(inspect(store.engine).get_table_names())
    finally:
        store.close()


def test_sqlite_files_are_tuned(db_url: str) -> None:
    store = Store.open(db_url)
    try:
        with store.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 5000
    finally:
        store.close()


def test_opening_twice_is_a_no_op(store_url: str) -> None:
    Store.open(store_url).close()
    store = Store.open(store_url)
    store.close()


def test_tables_module_matches_the_migrations(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        with store.engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), metadata)
        assert diff == []
    finally:
        store.close()


async def test_data_written_at_0001_reads_back_at_head(blank_store_url: str) -> None:
    engine = make_engine(blank_store_url)
    upgrade(engine, "0001")
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO runs (run_key, id, agent, permission_mode, run_mode, status, created_at)"
                " VALUES (7, 'run_old', 'claude', 'default', 'background', 'finished', '2026-11-01T00:00:00.000Z')"
            )
        )
        for seq in (1, 2):
            connection.execute(
                text(
                    "INSERT INTO log_entries (run_key, seq, ts, direction, method, payload)"
                    " VALUES (7, :seq, '2026-11-01T00:00:00.000Z', 'baton', '_baton/status', :payload)"
                ),
                {"seq": seq, "payload": json.dumps({"jsonrpc": "2.0", "params": {"n": seq}})},
            )
    engine.dispose()

    async with Store.open(blank_store_url) as store, SessionLog(store, Redactor()) as log:
        run = await store.get_run("run_old")
        assert (run.status, run.agent, run.created_at) == ("finished", "claude", "2026-11-01T00:00:00.000Z")
        entries = await log.read("run_old")
        assert [(entry["seq"], entry["payload"]["params"]) for entry in entries] == [
            (1, {"n": 1}),
            (2, {"n": 2}),
        ]
        log.open_run("run_old")
        assert log.append("run_old", "baton", "_baton/resume", {"jsonrpc": "2.0"}) == 3
        # Columns and tables added after 0001 start empty, and work on the old run.
        assert (run.resumed_from, run.owner, run.executor_id, run.budget_turns) == (None, None, None, None)
        [transition] = await store.list_transitions("run_old")
        assert (transition.from_status, transition.to_status) == (None, "finished")
        assert transition.at == "2026-11-01T00:00:00.000Z"
        assert await store.load_conversation_state("run_old") is None
        assert await store.list_snapshots("run_old") == []
        assert await store.read_runner_events("run_old") == []
        await store.inbox_put("run_old", "message", {"text": "hello"})
        [message] = await store.inbox_take("run_old", "test")
        assert message["payload"] == {"text": "hello"}
        updated = await store.update_run("run_old", owner="alice", executor_id="x1")
        assert (updated.status, updated.owner, updated.executor_id) == ("finished", "alice", "x1")
        with pytest.raises(RefusedError, match="invalid_transition"):  # an ended run never moves again
            await store.update_run("run_old", status="running", status_reason="resumed")
        await log.flush()


async def test_task_owners_kept_in_metadata_at_0002_move_to_the_owner_column(blank_store_url: str) -> None:
    engine = make_engine(blank_store_url)
    upgrade(engine, "0002")
    insert_task = text(
        "INSERT INTO tasks (id, prompt, metadata, created_at) VALUES (:id, 'p', :metadata, '2026-11-01T00:00:00.000Z')"
    )
    with engine.begin() as connection:
        for task_id, metadata in [
            ("task_owned", {"_baton_owner": "alice", "team": "x"}),
            ("task_cli", {"team": "y"}),
            ("task_bare", None),
            ("task_odd", {"_baton_owner": 7}),  # not a string: no owner, the key still goes
        ]:
            connection.execute(
                insert_task, {"id": task_id, "metadata": None if metadata is None else json.dumps(metadata)}
            )
        connection.execute(
            text(
                "INSERT INTO runs (run_key, id, agent, permission_mode, run_mode, status, created_at)"
                " VALUES (3, 'run_queued_old', 'claude', 'default', 'background', 'queued', '2026-11-01T00:00:00.000Z')"
            )
        )
    engine.dispose()

    async with Store.open(blank_store_url) as store:
        owned = await store.get_task("task_owned")
        assert (owned.owner, owned.metadata) == ("alice", {"team": "x"})
        cli = await store.get_task("task_cli")
        assert (cli.owner, cli.metadata) == (None, {"team": "y"})
        assert ((await store.get_task("task_bare")).owner, (await store.get_task("task_bare")).metadata) == (None, {})
        odd = await store.get_task("task_odd")
        assert (odd.owner, odd.metadata) == (None, {})
        # A run queued before runs.request existed has none: it cannot be restarted from its request.
        assert (await store.get_run("run_queued_old")).request is None
        created = await store.create_task("q", owner="bob", metadata={"_baton_owner": "mallory"})
        again = await store.get_task(created.id)
        assert (again.owner, again.metadata) == ("bob", {"_baton_owner": "mallory"})


async def test_agent_chunks_logged_at_0005_fold_from_their_payloads_at_head(blank_store_url: str) -> None:
    # Before 0006 no chunk had its text beside its payload: a rebuild reads those payloads.
    engine = make_engine(blank_store_url)
    upgrade(engine, "0005")

    def chunk(text: str) -> dict[str, object]:
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}

    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO runs (run_key, id, agent, permission_mode, run_mode, status, created_at)"
                " VALUES (4, 'run_old', 'claude', 'default', 'background', 'interrupted', '2026-11-01T00:00:00.000Z')"
            )
        )
        for seq, words in enumerate(("Let me ", "look."), 1):
            connection.execute(
                text(
                    "INSERT INTO log_entries (run_key, seq, ts, direction, method, payload)"
                    " VALUES (4, :seq, '2026-11-01T00:00:00.000Z', 'from_agent', 'session/update', :payload)"
                ),
                {"seq": seq, "payload": json.dumps(chunk(words))},
            )
    engine.dispose()

    async with Store.open(blank_store_url) as store, SessionLog(store, Redactor()) as log:
        log.open_run("run_old")
        log.append("run_old", "from_agent", "session/update", chunk(" Done."))
        await log.flush()
        with store.engine.connect() as connection:
            stored = connection.execute(text("SELECT chunk_text FROM log_entries WHERE run_key = 4 ORDER BY seq"))
            assert list(stored.scalars()) == [None, None, " Done."]
        conversation = await load_conversation(store, log, "run_old")
        assert [item.get("text") for item in conversation.view()] == ["Let me look. Done."]
        assert conversation.to_dict() == rebuild_conversation(await log.read("run_old")).to_dict()
        log.close_run("run_old")


async def test_processes_opening_a_blank_database_at_once_all_succeed(blank_store_url: str) -> None:
    # Threads stand in for processes: each Store has its own engine and connections.
    stores = await asyncio.gather(*(asyncio.to_thread(Store.open, blank_store_url) for _ in range(4)))
    try:
        assert {current_revision(store.engine) for store in stores} == {head_revision()}
        run = await stores[0].create_run(agent="claude")
        assert (await stores[3].get_run(run.id)).id == run.id
    finally:
        for store in stores:
            store.close()


def test_the_head_read_from_the_migration_files_is_alembics() -> None:
    assert declared_head() == head_revision()


def test_a_store_at_head_opens_without_alembic(store_url: str) -> None:
    """Every CLI command opens the store: one at the newest revision is opened without importing
    Alembic or taking the write lock (a blank one is migrated by the tests above)."""
    Store.open(store_url).close()
    probe = (
        "import sys; from baton.store import Store; "
        f"Store.open({store_url!r}).close(); print(sorted(m for m in sys.modules if m.startswith('alembic')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
