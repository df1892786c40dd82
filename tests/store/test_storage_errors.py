"""Database errors leave the store as one family, StorageError (baton.store.storage_errors)."""

from __future__ import annotations

import inspect
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy.exc

from baton.errors import CODES, BatonError, StorageError
from baton.store import LogWriteError, Store
from baton.store.reads import SqliteReads
from baton.store.storage_errors import mapping, storage_error

pytestmark = pytest.mark.timeout(30)


def _exceptions(module: object, root: type[Exception]) -> list[type[Exception]]:
    return [value for value in vars(module).values() if inspect.isclass(value) and issubclass(value, root)]


def test_every_sqlalchemy_and_sqlite3_exception_is_mapped() -> None:
    """Like httpx's test that every httpcore exception is mapped: a class SQLAlchemy or sqlite3
    adds fails here until it has its own line, so nothing reaches a face untranslated."""
    mapped = [kind for kind, _code in mapping()]
    missing = [
        kind.__name__
        for kind in (*_exceptions(sqlalchemy.exc, sqlalchemy.exc.SQLAlchemyError), *_exceptions(sqlite3, sqlite3.Error))
        if kind not in mapped
    ]
    assert missing == []
    assert all(code in StorageError.family_codes for _kind, code in mapping())
    # most specific first: no class is shadowed by a base class listed before it
    for position, (kind, _code) in enumerate(mapping()):
        assert not any(issubclass(kind, earlier) for earlier, _ in mapping()[:position]), kind


def test_the_family_is_in_the_error_tree() -> None:
    assert StorageError.family_codes <= CODES
    assert issubclass(LogWriteError, StorageError) and issubclass(StorageError, BatonError)
    assert LogWriteError("the disk is full").code == "log_write_failed"
    locked = storage_error(
        sqlalchemy.exc.OperationalError("UPDATE runs", {}, sqlite3.OperationalError("database is locked"))
    )
    assert locked is not None and locked.code == "storage_busy"
    assert storage_error(ValueError("not the database's")) is None


async def test_a_corrupt_database_is_a_storage_error_through_the_store_and_the_light_reads(tmp_path: Path) -> None:
    path = tmp_path / "baton.db"
    url = f"sqlite:///{path}"
    store = Store.open(url)
    try:
        run = await store.create_run(agent="claude")
        store.engine.dispose()
        path.write_bytes(b"this is not a database " * 512)
        with pytest.raises(StorageError) as through_store:
            await store.get_run(run.id)
        assert through_store.value.code == "storage_error"
        assert isinstance(through_store.value.__cause__, sqlalchemy.exc.DatabaseError)
    finally:
        await store.aclose()
    with pytest.raises(StorageError) as opening:
        Store.open(url)
    assert opening.value.code == "storage_error"


async def test_an_unreachable_database_is_storage_unavailable(tmp_path: Path) -> None:
    with pytest.raises(StorageError) as opening:
        Store.open(f"sqlite:///{tmp_path}")  # a directory: SQLite cannot open it
    assert opening.value.code == "storage_unavailable"
    path = tmp_path / "light.db"
    Store.open(f"sqlite:///{path}").close()
    reads = SqliteReads.open(f"sqlite:///{path}")
    assert reads is not None
    try:
        path.write_bytes(b"x" * 8192)
        with pytest.raises(StorageError):
            await reads.list_runs()
    finally:
        reads.close()
