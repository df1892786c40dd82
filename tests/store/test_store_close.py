"""Closing a ``Store`` closes every connection it opened, even one a worker thread still holds.

``await store.x()`` runs in a worker thread (``asyncio.to_thread``) that a cancel cannot stop:
the store may close while the thread still holds a pooled connection. Postgres only: psycopg
warns when an open connection is collected (SQLite's driver says nothing on Python 3.11).
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import Engine, text
from tests.conftest import open_connection_warnings

from baton.store import Store

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("checked_out_after_close", [False, True])
def test_a_connection_handed_back_after_close_is_closed(
    _postgres_store: tuple[str, object], checked_out_after_close: bool
) -> None:
    url, _ = _postgres_store
    open_connection_warnings()  # what earlier tests left is not this test's
    store = Store.open(url)
    holding, release = threading.Event(), threading.Event()
    seen: list[object] = []

    def hold(engine: Engine, seen: list[object]) -> None:  # a store call whose task was cancelled: its thread goes on
        if checked_out_after_close:
            release.wait(10)  # starts its query only after the close (a new pool's connection)
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
            seen.append(connection.connection.dbapi_connection)
            holding.set()
            if not checked_out_after_close:
                release.wait(10)

    thread = threading.Thread(target=hold, args=(store.engine, seen))
    thread.start()
    if not checked_out_after_close:
        assert holding.wait(10)
    store.close()
    release.set()
    thread.join(10)
    (dbapi_connection,) = seen
    assert getattr(dbapi_connection, "closed", None) is True
    del store, seen, dbapi_connection, thread
    assert open_connection_warnings() == []
