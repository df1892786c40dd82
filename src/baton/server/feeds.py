"""One reader of a run per view, shared by all the streams that watch it.

Every stream of a run used to read the run itself: its own log subscription, and for a run
executed by another process its own polling of the store; 200 viewers read every entry 200
times (and ``view=events`` projected it 200 times). :class:`SharedFeeds` keeps one *feed* per
run and view while anyone watches it: a task reads the frames (``read(start)``: replay, then
live, until the run's end) and appends them to a list; every stream reads that list from the
first frame after its resume point, at its own pace (a slow stream only lags behind in the
list; the run never waits for it). When the feed's last stream leaves, the task stops and the
frames are dropped; the next stream starts a new feed.

Where a feed starts:

- ``from_start=True`` (``view=events``: event seqs are a fold over the whole log): at the
  first id, so the list holds every frame and any resume point is in it.
- ``from_start=False`` (``view=acp``: entries can be read from any seq): where its first
  stream resumes. A later stream resuming before that reads the frames in between itself
  (``read(after)`` up to the feed's start: the store, as the feed's first frame is committed)
  and then continues in the list from the feed's first frame: ids are contiguous, so nothing is
  missed or repeated at the seam. A feed that has read nothing yet (its first stream resumed at
  the end of the log, or beyond it) starts over from the older point instead.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

from baton.server.sse import Frame

__all__ = ["Read", "SharedFeeds"]

_log = logging.getLogger("baton.server")

Read = Callable[[int], AsyncIterator[Frame]]
"""The frames with an id above the argument, in id order: the stored ones, then live, until the end."""


@dataclass
class _Feed:
    start: int  # the feed holds every frame with an id above this
    frames: list[Frame] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    ended: bool = False
    failure: Exception | None = None  # why the feed ended early: each of its streams raises it
    readers: int = 0
    task: asyncio.Task[None] | None = None

    def publish(self) -> None:
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()


class SharedFeeds:
    """The feeds being watched, by run id and view."""

    def __init__(self) -> None:
        self._feeds: dict[tuple[str, str], _Feed] = {}
        self.started: Counter[str] = Counter()  # feeds started, by view (each reads the run once)

    def active(self, view: str | None = None) -> int:
        """Feeds running now (of one view, or of all)."""
        return sum(1 for _run, feed_view in self._feeds if view is None or feed_view == view)

    def watching(self, run_id: str, view: str) -> int:
        """Streams reading the run's feed of ``view`` now."""
        feed = self._feeds.get((run_id, view))
        return feed.readers if feed is not None else 0

    async def frames(
        self, run_id: str, view: str, after: int, read: Read, *, from_start: bool
    ) -> AsyncGenerator[Frame, None]:
        """The run's frames of ``view`` with an id above ``after``, live, until the last one."""
        key = (run_id, view)
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = _Feed(start=0 if from_start else after)
            self._start(key, feed, read)
            self.started[view] += 1
        elif after < feed.start and not feed.frames and not feed.ended:
            # Nothing read yet (its first stream resumed at the log's end, or beyond it): the feed
            # starts over from this older point; its streams skip what they already have.
            assert feed.task is not None
            feed.task.cancel()
            feed.start = after
            self._start(key, feed, read)
        feed.readers += 1
        try:
            if after < feed.start:  # older than the feed: read up to its start, then join it
                async with aclosing(read(after)) as older:  # type: ignore[type-var]
                    async for frame in older:
                        if frame.id > feed.start:
                            break
                        yield frame
                        after = frame.id
                        if after == feed.start:
                            break
            index = bisect.bisect_right(feed.ids, after)
            while True:
                changed = feed.changed  # taken before reading: an append after this wakes us
                frames = feed.frames
                while index < len(frames):
                    frame = frames[index]
                    index += 1
                    if frame.id > after:  # the list may not have reached the resume point when we joined
                        yield frame
                if feed.ended:
                    if feed.failure is not None:
                        raise feed.failure
                    return
                await changed.wait()
        finally:
            feed.readers -= 1
            if not feed.readers and self._feeds.get(key) is feed:
                del self._feeds[key]
                if feed.task is not None:
                    feed.task.cancel()

    def _start(self, key: tuple[str, str], feed: _Feed, read: Read) -> None:
        run_id, view = key
        feed.task = asyncio.create_task(self._feed(key, feed, read), name=f"baton-feed-{view}-{run_id}")

    async def _feed(self, key: tuple[str, str], feed: _Feed, read: Read) -> None:
        try:
            async with aclosing(read(feed.start)) as source:  # type: ignore[type-var]
                async for frame in source:
                    feed.frames.append(frame)
                    feed.ids.append(frame.id)
                    feed.publish()
        except Exception as exc:  # the streams end with an error event; the next one starts a new feed
            _log.warning("reading run %s for its %s streams failed: %r", *key, exc)
            feed.failure = exc
            if self._feeds.get(key) is feed:  # a stream arriving now starts afresh
                del self._feeds[key]
        finally:
            if feed.task is asyncio.current_task():  # not a task cancelled because the feed started over
                feed.ended = True
                with contextlib.suppress(RuntimeError):  # the loop may be closing
                    feed.publish()
