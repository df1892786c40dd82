"""Revision 0005 (webhook deliveries) on a store written at 0004: the old rows are read for
events, and deliveries work."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import inspect, text

from baton.store import Store
from baton.store.deliveries import Deliveries
from baton.store.engine import make_engine
from baton.store.migrate import current_revision, head_revision, upgrade

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(autouse=True)
def no_leftover_agent_processes() -> Iterator[None]:
    yield


async def test_a_store_at_0004_gains_deliveries_and_its_rows_are_read(blank_store_url: str) -> None:
    engine = make_engine(blank_store_url)
    upgrade(engine, "0004")
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO runs (run_key, id, agent, permission_mode, run_mode, status, created_at, finished_at)"
                " VALUES (4, 'run_old', 'claude', 'default', 'background', 'finished',"
                " '2026-12-01T00:00:00.000Z', '2026-12-01T00:05:00.000Z')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO gates (id, run_key, kind, status, summary, created_at, decided_at, decided_by)"
                " VALUES ('gate_old', 4, 'tool', 'approved', 'Bash: ls', '2026-12-01T00:01:00.000Z',"
                " '2026-12-01T00:02:00.000Z', 'alice')"
            )
        )
    engine.dispose()

    store = Store.open(blank_store_url)
    try:
        assert current_revision(store.engine) == head_revision()  # 0005 and every later one
        tables = set(inspect(store.engine).get_table_names())
        assert {"webhook_deliveries", "webhook_cursor"} <= tables
        indexes = {index["name"] for index in inspect(store.engine).get_indexes("gates")}
        assert {"ix_gates_created_at", "ix_gates_decided_at"} <= indexes
        deliveries = Deliveries(store)
        assert [gate.id for gate in await deliveries.gates_opened("2026-12-01T00:00:00.000Z")] == ["gate_old"]
        assert [gate.decided_by for gate in await deliveries.gates_decided("2026-12-01T00:00:00.000Z")] == ["alice"]
        assert [run.id for run in await deliveries.runs_ended("2026-12-01T00:04:00.000Z")] == ["run_old"]
        assert await deliveries.runs_ended("2026-12-01T00:06:00.000Z") == []
        assert await deliveries.cursor("events", "2026-12-01T00:00:00.000Z") == "2026-12-01T00:00:00.000Z"
        await deliveries.advance("events", "2026-12-01T00:03:00.000Z")
        await deliveries.advance("events", "2026-12-01T00:02:00.000Z")  # never back
        assert await deliveries.cursor("events", "ignored") == "2026-12-01T00:03:00.000Z"
        row = {"url": "http://127.0.0.1:9/", "event_key": "run.finished:run_old", "event": "run.finished",
               "run_id": "run_old", "data": {"run": {"id": "run_old"}}, "created_at": "2026-12-01T00:05:00.000Z",
               "next_attempt_at": "2026-12-01T00:05:00.000Z", "give_up_at": "2026-12-01T01:05:00.000Z"}  # fmt: skip
        assert await deliveries.enqueue([row]) == 1
        (delivery,) = await deliveries.list("run_old")
        assert (delivery.status, delivery.attempts, delivery.data) == ("pending", 0, {"run": {"id": "run_old"}})
    finally:
        store.close()
    # ... and back down to 0004 (the downgrade drops what 0005 added).
    engine = make_engine(blank_store_url)
    try:
        from alembic import command

        from baton.store.migrate import _config

        config = _config()
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0004")
        assert "webhook_deliveries" not in set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
