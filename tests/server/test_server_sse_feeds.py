"""One reader per run for its ``view=acp`` streams: late joiners, the seam, other processes, failures."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import httpx
import pytest
from tests.server._fake_run import FakeRun, events_url
from tests.server._server import RunningServer, read_stream, running_server, wait_until

from baton.config import Settings
from baton.errors import UsageError
from baton.runs import Baton
from baton.server import ServerConfig
from baton.server.feeds import SharedFeeds
from baton.server.sse import Frame


@pytest.fixture
def server(settings: Settings) -> Iterator[RunningServer]:
    with running_server(settings, ServerConfig(sse_heartbeat_seconds=0.05)) as running:
        yield running


def _acp(run: FakeRun) -> list[tuple[int, str, Any]]:
    return [(entry["seq"], "entry", entry) for entry in run.entries()]


async def test_acp_streams_share_one_reader_and_late_joiners_at_old_ids_get_exactly_the_log(
    server: RunningServer,
) -> None:
    run = FakeRun(server)
    run.say("before anyone watched", count=3)  # entries 1-5
    feeds = server.state.feeds
    started = feeds.started["acp"]
    rng = random.Random(4)
    joined = threading.Event()

    def write() -> None:
        for index in range(120):
            run.say(f"chunk {index}")
        joined.wait(20)  # the run ends once every joiner is in: one feed serves them all
        run.finish()

    async with httpx.AsyncClient(timeout=30) as client:
        url = events_url(server, run.id, "?view=acp")

        def stream(after: int) -> asyncio.Task[Any]:
            return asyncio.create_task(read_stream(client, url, server.headers() | {"Last-Event-ID": str(after)}))

        readers = {3: stream(3)}  # the first stream: the feed starts at entry 3
        await asyncio.to_thread(wait_until, lambda: feeds.active("acp") == 1, 10, "the feed")
        writer = asyncio.create_task(asyncio.to_thread(write))
        while len(readers) < 12:  # joiners at ids before the feed's start, inside it and beyond the log
            await asyncio.sleep(rng.uniform(0.005, 0.05))
            after = rng.choice([0, 1, 2, rng.randint(3, 140)])
            if after not in readers:
                readers[after] = stream(after)
        await asyncio.to_thread(wait_until, lambda: feeds.watching(run.id, "acp") == 12, 10, "every stream")
        joined.set()
        await writer
        received = dict(zip(readers, await asyncio.wait_for(asyncio.gather(*readers.values()), 30), strict=True))
    assert feeds.started["acp"] == started + 1  # one reader for all twelve
    expected = _acp(run)
    for after, messages in received.items():
        assert [(m.id, m.event, m.data) for m in messages] == expected[after:], f"resumed after {after}"
    await asyncio.to_thread(wait_until, lambda: feeds.active() == 0, 10, "the feed to be dropped")


async def test_a_feed_started_beyond_the_log_still_gives_an_older_joiner_every_entry(server: RunningServer) -> None:
    run = FakeRun(server)  # entries 1-2
    feeds = server.state.feeds
    started = feeds.started["acp"]
    async with httpx.AsyncClient(timeout=30) as client:
        url = events_url(server, run.id, "?view=acp")
        ahead = asyncio.create_task(read_stream(client, url, server.headers() | {"Last-Event-ID": "40"}))
        await asyncio.to_thread(wait_until, lambda: feeds.active("acp") == 1, 10, "the feed")
        behind = asyncio.create_task(read_stream(client, url, server.headers() | {"Last-Event-ID": "1"}))
        await asyncio.to_thread(wait_until, lambda: server.streams.open == 2, 10, "the streams")
        for index in range(60):  # entries 3-62: up to the feed's start they are still to come when it joins
            await asyncio.to_thread(run.say, f"live {index}")
        await asyncio.to_thread(run.finish)
        late, early = await asyncio.wait_for(asyncio.gather(behind, ahead), 20)
    expected = _acp(run)
    assert [(m.id, m.event, m.data) for m in late] == expected[1:]
    assert [(m.id, m.event, m.data) for m in early] == expected[40:]
    assert feeds.started["acp"] == started + 1


async def test_acp_streams_of_a_run_executed_by_another_process_share_one_store_tail(
    server: RunningServer, settings: Settings
) -> None:
    feeds = server.state.feeds
    started = feeds.started["acp"]
    async with Baton(settings) as elsewhere:
        record = await elsewhere.store.create_run(agent="claude", owner="local", repo="/work/repo")
        elsewhere.log.open_run(record.id)

        def note(index: int) -> None:
            update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"t{index}"}}
            message = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": update}}
            elsewhere.log.append(record.id, "from_agent", "session/update", message)

        for index in range(4):
            note(index)
        await elsewhere.store.update_run(record.id, status="running")
        await elsewhere.log.flush()
        async with httpx.AsyncClient(timeout=30) as client:
            url = events_url(server, record.id, "?view=acp")
            readers = []
            for after in (2, 0, 3, 5):
                headers = server.headers() | {"Last-Event-ID": str(after)}
                readers.append(asyncio.create_task(read_stream(client, url, headers)))
                await asyncio.to_thread(wait_until, lambda: server.streams.open == len(readers), 10, "the stream")
                note(10 + after)
                await elsewhere.log.flush()
            await elsewhere.store.update_run(record.id, status="finished")
            elsewhere.log.close_run(record.id)
            received = await asyncio.wait_for(asyncio.gather(*readers), 20)
        entries = [entry["seq"] for entry in await elsewhere.log.read(record.id)]
    assert feeds.started["acp"] == started + 1
    for after, messages in zip((2, 0, 3, 5), received, strict=True):
        assert [m.id for m in messages] == entries[after:]


class _Log:
    """Frames 1, 2, 3 … appended by the test; ``read`` is a feed's reader over them (replay, then live)."""

    def __init__(self, frames: int) -> None:
        self.ids = list(range(1, frames + 1))
        self.reads: list[int] = []  # the ``after`` of every read, in order
        self.closed = False
        self.failure: Exception | None = None
        self.changed = asyncio.Condition()

    async def append(self, count: int = 1) -> None:
        async with self.changed:
            self.ids += range(len(self.ids) + 1, len(self.ids) + count + 1)
            self.changed.notify_all()

    async def end(self, failure: Exception | None = None) -> None:
        async with self.changed:
            self.closed, self.failure = True, failure
            self.changed.notify_all()

    async def wait_reads(self, count: int) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: len(self.reads) >= count)

    async def read(self, after: int) -> AsyncGenerator[Frame, None]:
        async with self.changed:
            self.reads.append(after)
            self.changed.notify_all()
        cursor = after
        while True:
            while cursor < len(self.ids):
                cursor += 1
                yield Frame(cursor, b"%d" % cursor)
            async with self.changed:
                await self.changed.wait_for(lambda seen=cursor: self.closed or seen < len(self.ids))
                if self.closed and cursor >= len(self.ids):
                    if self.failure is not None:
                        raise self.failure
                    return


async def _take(feeds: SharedFeeds, log: _Log, after: int, got: list[int]) -> BaseException | None:
    try:
        async for frame in feeds.frames("r", "acp", after, log.read, from_start=False):
            got.append(frame.id)
            async with log.changed:  # for a test waiting on what a stream got
                log.changed.notify_all()
    except UsageError as exc:
        return exc
    return None


async def test_an_older_joiner_reads_up_to_the_feeds_first_frame_itself_then_joins() -> None:
    feeds, log = SharedFeeds(), _Log(3)
    first: list[int] = []
    older: list[int] = []
    streams = [asyncio.create_task(_take(feeds, log, 2, first))]
    await log.append()
    async with log.changed:  # the feed has read a frame: it can no longer start over
        await log.changed.wait_for(lambda: first == [3, 4])
    streams.append(asyncio.create_task(_take(feeds, log, 0, older)))
    await log.wait_reads(2)
    await log.append(3)
    await log.end()
    assert await asyncio.wait_for(asyncio.gather(*streams), 5) == [None, None]
    assert (first, older, log.reads) == ([3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 7], [2, 0])
    assert feeds.started["acp"] == 1 and feeds.active() == 0


async def test_a_feed_that_read_nothing_yet_starts_over_from_an_older_joiner() -> None:
    feeds, log = SharedFeeds(), _Log(3)
    ahead: list[int] = []
    behind: list[int] = []
    streams = [asyncio.create_task(_take(feeds, log, 5, ahead))]
    await log.wait_reads(1)
    streams.append(asyncio.create_task(_take(feeds, log, 1, behind)))
    await log.wait_reads(2)
    await log.append(4)
    await log.end()
    assert await asyncio.wait_for(asyncio.gather(*streams), 5) == [None, None]
    assert (ahead, behind, log.reads) == ([6, 7], [2, 3, 4, 5, 6, 7], [5, 1])  # one feed, started over at 1
    assert feeds.started["acp"] == 1 and feeds.active() == 0


async def test_a_failing_feed_ends_each_of_its_streams_with_its_error_and_the_next_starts_afresh() -> None:
    feeds, log = SharedFeeds(), _Log(3)
    got: list[list[int]] = [[], []]
    streams = [asyncio.create_task(_take(feeds, log, after, ids)) for after, ids in zip((0, 2), got, strict=True)]
    await log.wait_reads(1)
    await log.end(UsageError("request_invalid", "the store went away"))
    results = await asyncio.wait_for(asyncio.gather(*streams), 5)
    assert got == [[1, 2, 3], [3]] and all(isinstance(error, UsageError) for error in results)
    assert feeds.active() == 0
    log.closed, log.failure = False, None
    fresh: list[int] = []
    again = asyncio.create_task(_take(feeds, log, 1, fresh))
    await log.wait_reads(2)
    assert feeds.started["acp"] == 2
    await log.end()
    assert await asyncio.wait_for(again, 5) is None and fresh == [2, 3]
