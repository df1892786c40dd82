"""``Store.reachable()``: what ``GET /health`` reports, on a live and on a stopped database."""

from __future__ import annotations

from pathlib import Path

from baton.store import Store
from baton.testing.postgres import TemporaryPostgres


async def test_a_live_sqlite_store_is_reachable(tmp_path: Path) -> None:
    async with Store.open(f"sqlite:///{tmp_path / 'baton.db'}") as store:
        assert await store.reachable() is True


async def test_a_stopped_postgres_is_unreachable_not_an_exception() -> None:
    server = TemporaryPostgres(durable=False)
    url = server.__enter__()
    store = Store.open(url)
    try:
        assert await store.reachable() is True
        server.__exit__(None, None, None)  # the server goes away under the store
        assert await store.reachable() is False
    finally:
        store.close()
