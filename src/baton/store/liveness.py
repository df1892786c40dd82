"""Executors' liveness across machines on Postgres: one session-level advisory lock per executor.

An executor of the fleet (docs/fleet.md) holds ``pg_advisory_lock(key)`` on a connection of its
own for as long as it lives; ``key`` is a 64-bit hash of its executor id
(:func:`executor_key`). Postgres drops a session's advisory locks with its connection, so:

- a process that dies (SIGKILL, OOM, a crash) loses its lock as soon as its kernel closes the
  socket — at once when the machine is up;
- a machine that vanishes (network cut, power) loses it once the server gives up on the TCP
  connection: the lock's session sets the server side ``tcp_keepalives_idle`` (5 s),
  ``tcp_keepalives_interval`` (2 s), ``tcp_keepalives_count`` (3) and ``tcp_user_timeout``
  (10 s), so an idle connection is dropped within 5 + 3 × 2 = 11 s, one with unacknowledged
  data within 10 s (:data:`LOCK_LOSS_BOUND_SECONDS`). The client side sets the same through
  libpq's ``keepalives*`` and ``tcp_user_timeout``, so the worker learns as fast that its lock
  is gone.

:func:`live_executor_keys` reads ``pg_locks`` (every session's locks of the server, one query)
for the keys held now.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from typing import Any, Final

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from baton.store.engine import make_engine
from baton.store.storage_errors import map_storage_errors

__all__ = [
    "KEEPALIVE_COUNT",
    "KEEPALIVE_IDLE_SECONDS",
    "KEEPALIVE_INTERVAL_SECONDS",
    "LOCK_LOSS_BOUND_SECONDS",
    "TCP_USER_TIMEOUT_MS",
    "ExecutorLock",
    "executor_key",
    "live_executor_keys",
    "release_if_dead",
]

KEEPALIVE_IDLE_SECONDS: Final = 5
KEEPALIVE_INTERVAL_SECONDS: Final = 2
KEEPALIVE_COUNT: Final = 3
TCP_USER_TIMEOUT_MS: Final = 10_000
CONNECT_TIMEOUT_SECONDS: Final = 3  # a lock taken again must not wait on a vanished network
# The longest a dead machine's lock outlives it (an idle connection: idle + count × interval).
LOCK_LOSS_BOUND_SECONDS: Final = max(
    KEEPALIVE_IDLE_SECONDS + KEEPALIVE_COUNT * KEEPALIVE_INTERVAL_SECONDS, TCP_USER_TIMEOUT_MS / 1000
)
# Advisory locks of baton's executors: the first key of the two-key form, so no other user of
# the database collides with them.
_CLASS: Final = 0x62617400  # "bat\0"

_HELD: Final = text(
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory' "
    "AND classid = :class AND objsubid = 2 AND objid::bigint = :key AND granted)"
)
_SESSION_SETTINGS: Final = (
    f"SET tcp_keepalives_idle = {KEEPALIVE_IDLE_SECONDS}",
    f"SET tcp_keepalives_interval = {KEEPALIVE_INTERVAL_SECONDS}",
    f"SET tcp_keepalives_count = {KEEPALIVE_COUNT}",
    f"SET tcp_user_timeout = {TCP_USER_TIMEOUT_MS}",
)


def executor_key(executor_id: str) -> int:
    """The executor's lock key: 31 bits of the SHA-256 of its id (a positive int4)."""
    return int.from_bytes(hashlib.sha256(executor_id.encode()).digest()[:4], "big") & 0x7FFFFFFF


def _lock_engine(url: str) -> Engine:
    """An engine of one connection at a time, autocommit, with libpq's keepalives and user timeout."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    connect_args: dict[str, Any] = {
        "keepalives": 1,
        "keepalives_idle": KEEPALIVE_IDLE_SECONDS,
        "keepalives_interval": KEEPALIVE_INTERVAL_SECONDS,
        "keepalives_count": KEEPALIVE_COUNT,
        "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
        "connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "application_name": "baton-executor-lock",
    }
    parsed = make_engine(url)  # the URL as the store reads it (psycopg 3)
    engine_url = parsed.url
    parsed.dispose()
    return create_engine(engine_url, poolclass=NullPool, connect_args=connect_args, isolation_level="AUTOCOMMIT")


class ExecutorLock:
    """This executor's advisory lock, held on a connection of its own until :meth:`release`."""

    def __init__(self, url: str, executor_id: str) -> None:
        self.url = url
        self.executor_id = executor_id
        self.key = executor_key(executor_id)
        self._engine: Engine | None = None
        self._connection: Connection | None = None
        self._guard = threading.Lock()

    def acquire(self) -> None:
        """Take the lock (blocking: call it in a thread); the connection stays open."""
        with self._guard, map_storage_errors():
            self._engine = _lock_engine(self.url)
            connection = self._engine.connect()
            for statement in _SESSION_SETTINGS:
                connection.execute(text(statement))
            connection.execute(text("SELECT pg_advisory_lock(:class, :key)"), {"class": _CLASS, "key": self.key})
            self._connection = connection

    def held(self) -> bool:
        """Whether the lock's session still answers and holds the lock (blocking: on a vanished
        network until ``tcp_user_timeout``; :class:`~baton.runs.lock_watch.LockWatch` gives up
        sooner). The session is asked, not trusted: a connection that reconnected behind the
        pool's back would answer without the lock."""
        with self._guard:
            connection = self._connection
        if connection is None:
            return False
        try:
            held = connection.execute(_HELD, {"class": _CLASS, "key": self.key}).scalar()
        except Exception:
            return False
        return bool(held)

    def regain(self) -> bool:
        """Take the lock on a new connection if no session holds it (``pg_try_advisory_lock``):
        True, and the old connection is dropped; False when it is still held — by this
        executor's old session, which the server has not given up yet (blocking)."""
        with map_storage_errors():
            engine = _lock_engine(self.url)
            try:
                connection = engine.connect()
                for statement in _SESSION_SETTINGS:
                    connection.execute(text(statement))
                taken = connection.execute(
                    text("SELECT pg_try_advisory_lock(:class, :key)"), {"class": _CLASS, "key": self.key}
                ).scalar()
            except BaseException:
                engine.dispose()
                raise
        if not taken:
            connection.close()
            engine.dispose()
            return False
        with self._guard:
            old = self._connection, self._engine
            self._connection, self._engine = connection, engine
        # The old connection may hang on a dead socket: closed on a thread nobody waits for.
        threading.Thread(target=_close, args=old, name="baton-lock-close", daemon=True).start()
        return True

    def release(self) -> None:
        """Close the connection: the lock goes with it (blocking)."""
        with self._guard:
            old = self._connection, self._engine
            self._connection = self._engine = None
        _close(*old)


def _close(connection: Connection | None, engine: Engine | None) -> None:
    if connection is not None:
        with contextlib.suppress(Exception):  # the connection was already gone: so is the lock
            connection.close()
    if engine is not None:
        with contextlib.suppress(Exception):
            engine.dispose()


def release_if_dead(engine: Engine, run_id: str, executor_id: str) -> bool:
    """Release the run from ``executor_id`` (its executor becomes none) if that is still its
    executor and nobody holds the executor's lock, in one statement (blocking): an executor that
    took its lock again after a lost connection keeps its runs, whatever a scanner read before."""
    statement = text(
        "UPDATE runs SET executor_id = NULL WHERE id = :run_id AND executor_id = :executor AND NOT EXISTS ("
        "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = :class AND objsubid = 2 "
        "AND objid::bigint = :key AND granted)"
    )
    arguments = {"run_id": run_id, "executor": executor_id, "class": _CLASS, "key": executor_key(executor_id)}
    with map_storage_errors(), engine.begin() as connection:
        return connection.execute(statement, arguments).rowcount == 1


def live_executor_keys(engine: Engine) -> set[int]:
    """The keys of every executor lock held now (blocking; one read of ``pg_locks``)."""
    query = text(
        "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND classid = :class "
        "AND objsubid = 2 AND granted"
    )
    with map_storage_errors(), engine.connect() as connection:
        return {int(row[0]) for row in connection.execute(query, {"class": _CLASS})}
