"""One projection of a run's log shared by all its ``view=events`` streams.

Runner events are a fold over the whole log (their seqs count from the log's start), so each
``view=events`` stream used to project the log itself: 200 viewers of one run projected every
entry 200 times. :class:`SharedProjections` keeps one projection per run while anyone watches
it: a task reads the run's committed entries (replay, then live: ``run_entries``), projects
them once and appends the encoded frames to a list; every stream reads that list from the
first event after its resume point, at its own pace (a slow stream only lags behind in the
list; the run never waits for it). When the run's last stream leaves, the task stops and the
frames are dropped; the next stream starts a new projection from the store.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

from baton.events.entry import LogEntry
from baton.events.project import Projector
from baton.server.sse import Frame, FrameCache

__all__ = ["SharedProjections"]

_log = logging.getLogger("baton.server")

Entries = Callable[[str, int], AsyncIterator[LogEntry]]


@dataclass
class _Projection:
    frames: list[Frame] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    ended: bool = False
    readers: int = 0
    task: asyncio.Task[None] | None = None

    def publish(self) -> None:
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()


class SharedProjections:
    """The runs' projections being watched, by run id."""

    def __init__(self, frames: FrameCache) -> None:
        self._frames = frames
        self._runs: dict[str, _Projection] = {}
        self.started = 0  # projections started (each one reads the run's log once)

    @property
    def active(self) -> int:
        return len(self._runs)

    async def events(self, run_id: str, after: int, entries: Entries) -> AsyncGenerator[Frame, None]:
        """The run's event frames with an id above ``after``, live, until its last event."""
        projection = self._runs.get(run_id)
        if projection is None:
            projection = self._runs[run_id] = _Projection()
            feeding = self._feed(run_id, projection, entries)
            projection.task = asyncio.create_task(feeding, name=f"baton-project-{run_id}")
            self.started += 1
        projection.readers += 1
        try:
            index = bisect.bisect_right(projection.ids, after)
            while True:
                changed = projection.changed  # taken before reading: an append after this wakes us
                while index < len(projection.frames):
                    frame = projection.frames[index]
                    index += 1
                    if frame.id > after:
                        yield frame
                if projection.ended:
                    return
                await changed.wait()
        finally:
            projection.readers -= 1
            if not projection.readers and self._runs.get(run_id) is projection:
                del self._runs[run_id]
                if projection.task is not None:
                    projection.task.cancel()

    async def _feed(self, run_id: str, projection: _Projection, entries: Entries) -> None:
        projector = Projector(run_id)
        try:
            async with aclosing(entries(run_id, 0)) as source:  # type: ignore[type-var]
                async for entry in source:
                    events = projector.feed(entry)
                    for event in events:
                        seq = event["seq"]
                        data = self._frames.frame(run_id, "events", seq, event["type"], event)
                        projection.frames.append(Frame(seq, data))
                        projection.ids.append(seq)
                    if events:
                        projection.publish()
                    if projector.ended:
                        return
        except asyncio.CancelledError:
            raise
        except Exception:  # the streams end; the next one starts over from the store
            _log.exception("projecting run %s for its event streams failed", run_id)
        finally:
            projection.ended = True
            with contextlib.suppress(RuntimeError):  # the loop may be closing
                projection.publish()
