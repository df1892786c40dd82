"""The session log's in-memory state: per-run positions, subscribers, waiters."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from baton.events.entry import LogEntry

__all__ = ["RunLog", "Subscriber", "Waiters"]

SUBSCRIBER_BUFFER: Final = 10_000  # a slower subscriber falls back to reading the store


class Waiters:
    """Futures waiting for a counter (a committed seq, a committed total) to reach a value."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def wait(self, target: int) -> asyncio.Future[None]:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (target, next(self._order), future))
        return future

    def advance(self, value: int) -> None:
        """Wake every waiter whose target is at most ``value``."""
        while self._heap and self._heap[0][0] <= value:
            _target, _order, future = heapq.heappop(self._heap)
            if not future.done():
                future.set_result(None)

    def fail(self, error: Callable[[], BaseException]) -> None:
        while self._heap:
            _target, _order, future = heapq.heappop(self._heap)
            if not future.done():
                future.set_exception(error())


@dataclass(eq=False)
class Subscriber:
    entries: deque[LogEntry] = field(default_factory=deque)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    overflowed: bool = False

    def push(self, entry: LogEntry) -> None:
        if self.overflowed:
            return
        if len(self.entries) >= SUBSCRIBER_BUFFER:
            self.entries.clear()
            self.overflowed = True
        else:
            self.entries.append(entry)


@dataclass(eq=False)
class RunLog:
    run_id: str
    run_key: int
    next_seq: int
    committed: int
    closed: bool = False
    # Fenced (SessionLog.fence): its rows commit only while this is the run's executor (or it has
    # none); lost: this process no longer executes it, its entries are dropped, never committed.
    executor: str | None = None
    lost: bool = False
    waiters: Waiters = field(default_factory=Waiters)
    subscribers: set[Subscriber] = field(default_factory=set)

    def wake_subscribers(self) -> None:
        for subscriber in self.subscribers:
            subscriber.wake.set()
