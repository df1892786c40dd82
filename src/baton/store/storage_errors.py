"""Database errors translated at the store's boundary into one family, :class:`~baton.errors.StorageError`.

Whatever SQLAlchemy or a driver raises inside the store (its worker threads, the session log's
reads, the ``sqlite3`` read path) leaves it as a ``StorageError`` with a stable code, the
original chained (``raise … from exc``) — the way httpx maps httpcore's exceptions
(``map_httpcore_exceptions``). Every exception class of ``sqlalchemy.exc`` and every ``sqlite3``
error has its own line in :func:`mapping` (a test checks that none is missing), most specific
first. This module imports no SQLAlchemy (the light read path uses it): SQLAlchemy's classes
are mapped once SQLAlchemy is loaded, which it is whenever one of its errors can exist.

- ``storage_busy``: the database is locked, or a pool or lock wait timed out (try again);
- ``storage_unavailable``: it cannot be reached or opened (a lost connection, a missing file);
- ``storage_conflict``: a constraint refused the write (a duplicate key, a missing parent row);
- ``storage_error``: anything else the database refused (a corrupt file, a programming error).

A session log that could not be committed raises :class:`~baton.store.log.LogWriteError`
(``log_write_failed``), of the same family.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any, Final, TypeVar

from baton.errors import StorageError

__all__ = ["SQLITE3_MAPPING", "in_thread", "map_storage_errors", "mapping", "storage_error"]

T = TypeVar("T")
Mapping = tuple[tuple[type[Exception], str], ...]

# The standard sqlite3 read path (baton.store.reads, baton.store.inbox_watch); exact classes.
SQLITE3_MAPPING: Final[Mapping] = (
    (sqlite3.IntegrityError, "storage_conflict"),
    (sqlite3.OperationalError, "storage_unavailable"),  # "database is locked": storage_busy
    (sqlite3.InterfaceError, "storage_unavailable"),
    (sqlite3.DataError, "storage_error"),
    (sqlite3.InternalError, "storage_error"),
    (sqlite3.ProgrammingError, "storage_error"),
    (sqlite3.NotSupportedError, "storage_error"),
    (sqlite3.DatabaseError, "storage_error"),
    (sqlite3.Error, "storage_error"),
)
_BUSY: Final = ("database is locked", "database table is locked", "lock timeout", "could not obtain lock")


@cache
def _sqlalchemy_mapping() -> Mapping:
    from sqlalchemy import exc as sa

    return (
        # SQLAlchemy's wrappers of the DB-API (PEP 249) errors
        (sa.IntegrityError, "storage_conflict"),
        (sa.OperationalError, "storage_unavailable"),  # "database is locked" / a lock timeout: storage_busy
        (sa.InterfaceError, "storage_unavailable"),
        (sa.DataError, "storage_error"),
        (sa.InternalError, "storage_error"),
        (sa.ProgrammingError, "storage_error"),
        (sa.NotSupportedError, "storage_error"),
        (sa.DatabaseError, "storage_error"),
        (sa.DBAPIError, "storage_error"),
        (sa.StatementError, "storage_error"),
        # the pool and the connection
        (sa.InvalidatePoolError, "storage_unavailable"),
        (sa.DisconnectionError, "storage_unavailable"),
        (sa.TimeoutError, "storage_busy"),  # waiting for a pooled connection
        (sa.ResourceClosedError, "storage_unavailable"),
        # no driver for the URL's database, or none loaded
        (sa.NoSuchModuleError, "storage_unavailable"),
        (sa.NoDBAPILoaded, "storage_unavailable"),
        # SQLAlchemy's own refusals (a statement or schema baton built wrongly, a result it misread)
        (sa.DuplicateColumnError, "storage_error"),
        (sa.ObjectNotExecutableError, "storage_error"),
        (sa.NoForeignKeysError, "storage_error"),
        (sa.AmbiguousForeignKeysError, "storage_error"),
        (sa.ConstraintColumnNotFoundError, "storage_error"),
        (sa.CircularDependencyError, "storage_error"),
        (sa.UnsupportedCompilationError, "storage_error"),
        (sa.IdentifierError, "storage_error"),
        (sa.IllegalStateChangeError, "storage_error"),
        (sa.NoInspectionAvailable, "storage_error"),
        (sa.PendingRollbackError, "storage_error"),
        (sa.NoSuchColumnError, "storage_error"),
        (sa.AmbiguousColumnError, "storage_error"),
        (sa.AwaitRequired, "storage_error"),
        (sa.MissingGreenlet, "storage_error"),
        (sa.NoReferencedTableError, "storage_error"),
        (sa.NoReferencedColumnError, "storage_error"),
        (sa.NoSuchTableError, "storage_error"),
        (sa.UnreflectableTableError, "storage_error"),
        (sa.UnboundExecutionError, "storage_error"),
        (sa.NoResultFound, "storage_error"),
        (sa.MultipleResultsFound, "storage_error"),
        (sa.NoReferenceError, "storage_error"),
        (sa.CompileError, "storage_error"),
        (sa.ArgumentError, "storage_error"),
        (sa.InvalidRequestError, "storage_error"),
        (sa.SQLAlchemyError, "storage_error"),
    )


def mapping() -> Mapping:
    """Every mapped class and its code, most specific first (SQLAlchemy's once it is loaded)."""
    return (_sqlalchemy_mapping() if "sqlalchemy" in sys.modules else ()) + SQLITE3_MAPPING


def storage_error(exc: BaseException) -> StorageError | None:
    """The ``StorageError`` for a database exception (None: not one)."""
    if isinstance(exc, StorageError):
        return exc
    for kind, code in mapping():
        if isinstance(exc, kind):
            text = str(exc).strip()
            if code == "storage_unavailable" and any(words in text.lower() for words in _BUSY):
                code = "storage_busy"
            first = text.splitlines()[0] if text else type(exc).__name__
            return StorageError(code, f"the database failed ({type(exc).__name__}): {first}")
    return None


@contextmanager
def map_storage_errors() -> Iterator[None]:
    """Raise any database exception of the block as its ``StorageError`` (the original chained)."""
    try:
        yield
    except StorageError:
        raise
    except Exception as exc:
        mapped = storage_error(exc)
        if mapped is None:
            raise
        raise mapped from exc


async def in_thread(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``asyncio.to_thread`` for the store's blocking work, its database errors mapped."""
    with map_storage_errors():
        return await asyncio.to_thread(function, *args, **kwargs)
