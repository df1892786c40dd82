"""Wake-ups between local processes on one SQLite store: a doorbell (a FIFO) per waiting process.

A process that waits for inbox commands (a run's inbox reader, a parked run's waiter, an
adopter) opens a FIFO in the database's doorbell directory (``<database file>-wake/``) and
reads it from its event loop: waiting costs nothing. A process that commits an inbox row (a
command, a gate decision: :func:`baton.store._rundata.inbox_insert` marks the connection)
writes one byte into every FIFO there once the transaction has committed (the connection's
check-in to the pool, after the commit). A byte only says "look": the rows are the truth, and
every waiter still reads on a slow tick in case a wake-up was lost (a writer without this
code, a directory it could not write).

A FIFO is made under a hidden name, opened, then renamed into place, so a ringer never finds
one without a reader; a FIFO whose reader is gone (its process died) answers ``ENXIO`` and the
ringer removes it. Each reader also holds its FIFO's write end, so the read end never reports
a hang-up when a ringer closes (which would make the loop spin).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import secrets
from pathlib import Path
from typing import Any, ClassVar, Final

__all__ = ["Doorbell", "doorbell_dir", "ring", "ring_after_commit"]

_log = logging.getLogger("baton.store.doorbell")

SUFFIX: Final = "-wake"
_MARK: Final = "baton_ring"  # in a pooled connection's info: ring at check-in


def doorbell_dir(database: str) -> Path:
    """The doorbell directory of the SQLite file ``database``."""
    path = Path(database).resolve()
    return path.with_name(path.name + SUFFIX)


def ring(directory: Path) -> None:
    """Wake every process waiting on ``directory`` (a byte into each FIFO; never blocks)."""
    try:
        paths = list(directory.iterdir())
    except OSError:  # no directory: nobody waits
        return
    for path in paths:
        if path.name.startswith("."):  # still being made: its process reads the rows after
            continue
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no reader: its process is gone
                with contextlib.suppress(OSError):
                    path.unlink()
            continue
        try:
            os.write(fd, b"\0")
        except OSError:  # full (EAGAIN): it was rung already
            pass
        finally:
            os.close(fd)


def ring_after_commit(connection_info: dict[str, Any]) -> None:
    """Mark a pooled connection: its next check-in (after the commit) rings the doorbells."""
    connection_info[_MARK] = True


def on_checkin(directory: Path, connection_info: dict[str, Any]) -> None:
    """The pool's check-in hook of a SQLite engine (:func:`baton.store.engine.make_engine`)."""
    if connection_info.pop(_MARK, False):
        ring(directory)


class Doorbell:
    """This process's FIFO in a doorbell directory, read on one event loop; sets its subscribers' events.

    One per (event loop, directory), shared by every waiter there (:meth:`join`, :meth:`leave`).
    """

    _open: ClassVar[dict[tuple[int, Path], Doorbell]] = {}

    def __init__(self, key: tuple[int, Path], path: Path, read_fd: int, write_fd: int) -> None:
        self._key = key
        self._path = path
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._events: set[asyncio.Event] = set()
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(read_fd, self._rung)

    @classmethod
    def join(cls, directory: Path, event: asyncio.Event) -> Doorbell | None:
        """The loop's doorbell on ``directory`` (made if needed), setting ``event`` when rung;
        None when no FIFO can be made there (the caller polls)."""
        key = (id(asyncio.get_running_loop()), directory)
        bell = cls._open.get(key)
        if bell is None:
            try:
                bell = cls._open[key] = cls._make(key, directory)
            except OSError as exc:
                _log.warning("no doorbell in %s (polling instead): %s", directory, exc)
                return None
        bell._events.add(event)
        return bell

    @classmethod
    def _make(cls, key: tuple[int, Path], directory: Path) -> Doorbell:
        directory.mkdir(parents=True, exist_ok=True)
        name = f"{os.getpid()}-{secrets.token_hex(4)}"
        hidden, path = directory / f".{name}", directory / name
        os.mkfifo(hidden, 0o600)
        try:
            read_fd = os.open(hidden, os.O_RDONLY | os.O_NONBLOCK)
            write_fd = os.open(hidden, os.O_WRONLY | os.O_NONBLOCK)
            hidden.rename(path)
        finally:
            with contextlib.suppress(OSError):
                hidden.unlink()
        return cls(key, path, read_fd, write_fd)

    def leave(self, event: asyncio.Event) -> None:
        self._events.discard(event)
        if self._events or self._open.get(self._key) is not self:
            return
        del self._open[self._key]
        with contextlib.suppress(Exception):  # the loop may be closed
            self._loop.remove_reader(self._read_fd)
        with contextlib.suppress(OSError):
            self._path.unlink()
        os.close(self._read_fd)
        os.close(self._write_fd)

    def _rung(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self._read_fd, 4096):
                pass
        for event in tuple(self._events):
            event.set()
