"""The SQLAlchemy engine baton uses, with SQLite tuned for one writer and many readers.

On SQLite every transaction baton opens for writing starts with ``BEGIN IMMEDIATE``: a
deferred transaction that reads and then writes fails at once with "database is locked"
when another connection wrote in between (docs/design.md, "SQLite and Postgres for the log").
Reads that must not take the write lock use ``engine.connect().execution_options(
**READ_ONLY)``, which begins a plain deferred transaction.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.engine import Connection

from baton.errors import UsageError
from baton.store.doorbell import doorbell_dir, on_checkin

__all__ = ["BUSY_TIMEOUT_MS", "READ_ONLY", "make_engine"]

BUSY_TIMEOUT_MS: Final = 5000
READ_ONLY: Final[dict[str, Any]] = {"baton_read_only": True}


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite files get WAL, ``synchronous=NORMAL`` and a busy timeout.

    ``postgresql://`` (and ``postgres://``) URLs use the psycopg 3 driver.
    """
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    try:
        parsed = make_url(url)
    except Exception as exc:  # sqlalchemy raises ArgumentError and ValueError here
        raise UsageError("config_invalid", f"invalid database URL: {exc}") from exc
    if parsed.get_backend_name() == "postgresql":
        if parsed.get_driver_name() != "psycopg":
            # postgresql:// means psycopg (v3) here, not SQLAlchemy's default psycopg2.
            parsed = parsed.set(drivername="postgresql+psycopg")
        return create_engine(parsed, pool_pre_ping=True)
    if parsed.get_backend_name() != "sqlite":
        raise UsageError("config_invalid", "the store runs on SQLite or Postgres (postgresql://…)")
    if not parsed.database or parsed.database == ":memory:":
        raise UsageError("config_invalid", "the SQLite store needs a file (the log uses a second connection)")
    Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(parsed, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
    event.listen(engine, "connect", _on_sqlite_connect)
    event.listen(engine, "begin", _on_sqlite_begin)
    doorbells = doorbell_dir(parsed.database)

    def ring_committed(_dbapi_connection: Any, record: Any) -> None:
        # After the commit: a transaction that wrote an inbox row wakes the local waiters.
        if record is not None:
            on_checkin(doorbells, record.info)

    event.listen(engine, "checkin", ring_committed)
    return engine


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # sqlite3 must not emit its own BEGIN: _on_sqlite_begin chooses the kind of transaction.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        _enter_wal(cursor)
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def _enter_wal(cursor: Any) -> None:
    """Switch the file to WAL, waiting for the connections that hold it.

    Switching needs the file to itself, and SQLite answers "database is locked" at once, without
    its busy handler, when another process is opening a blank database at the same moment — so
    this retries within the busy timeout. A file already in WAL answers at once.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def _on_sqlite_begin(connection: Connection) -> None:
    if connection.get_execution_options().get("baton_read_only"):
        connection.exec_driver_sql("BEGIN")
    else:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
