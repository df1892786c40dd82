"""Which fleet queues live workers serve, on Postgres: one shared advisory lock per queue a worker
takes runs from (docs/fleet.md "Labels and priority").

A worker started with ``--labels`` serves the queue of every subset of its labels; it holds
``pg_advisory_lock_shared(class, key)`` for each, ``key`` a 31-bit hash of the queue's name
(:func:`queue_key`), on a connection of its own for as long as it lives. Postgres drops a
session's advisory locks with its connection, so a worker that dies stops offering its queues
as its executor lock goes (baton.store.liveness, whose connection settings this one shares).
:func:`offered_queue_keys` reads ``pg_locks`` for the keys held now: a queued run whose queue's
key is missing is one no live worker can take.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterable
from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from baton.store.liveness import _lock_engine
from baton.store.storage_errors import map_storage_errors

__all__ = ["QueueOffer", "offered_queue_keys", "queue_key"]

# The first key of the two-key form: baton's executors are 0x62617400 ("bat\0"), its queues this.
_CLASS: Final = 0x62617401  # "bat\1"


def queue_key(name: str) -> int:
    """The lock key of a queue's name: 31 bits of its SHA-256 (a positive int4)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") & 0x7FFFFFFF


class QueueOffer:
    """The queues one worker serves, offered as shared advisory locks until :meth:`release`."""

    def __init__(self, url: str, queues: Iterable[str]) -> None:
        self.url = url
        self.queues = tuple(queues)
        self._engine: Engine | None = None
        self._connection: Connection | None = None
        self._guard = threading.Lock()

    def acquire(self) -> None:
        """Take the locks (blocking: call it in a thread); the connection stays open."""
        with self._guard, map_storage_errors():
            self._engine = _lock_engine(self.url)
            connection = self._engine.connect()
            for name in self.queues:
                connection.execute(
                    text("SELECT pg_advisory_lock_shared(:class, :key)"), {"class": _CLASS, "key": queue_key(name)}
                )
            self._connection = connection

    def release(self) -> None:
        """Close the connection: the locks go with it (blocking)."""
        with self._guard:
            if self._connection is not None:
                with contextlib.suppress(Exception):  # already gone: so are the locks
                    self._connection.close()
                self._connection = None
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None


def offered_queue_keys(engine: Engine) -> set[int]:
    """The keys of every queue a live worker serves now (blocking; one read of ``pg_locks``)."""
    query = text(
        "SELECT DISTINCT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND classid = :class "
        "AND objsubid = 2 AND granted"
    )
    with map_storage_errors(), engine.connect() as connection:
        return {int(row[0]) for row in connection.execute(query, {"class": _CLASS})}
