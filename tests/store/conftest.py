from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from baton.store import Redactor, SessionLog, Store


@pytest.fixture(autouse=True)
def no_leftover_agent_processes() -> Iterator[None]:
    """Store tests start no agents (and must not fail on other suites' agents running alongside)."""
    yield


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """A SQLite database, for what is about SQLite itself; everything else uses ``store_url``."""
    return f"sqlite:///{tmp_path / 'baton.db'}"


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    async with Store.open(store_url) as opened:
        yield opened


@pytest.fixture
async def log(store: Store) -> AsyncIterator[SessionLog]:
    async with SessionLog(store, Redactor(["canary-secret-1234"])) as opened:
        yield opened


@pytest.fixture
async def run_id(store: Store, log: SessionLog) -> str:
    run = await store.create_run(agent="claude", model="sonnet")
    log.open_run(run.id)
    return run.id
