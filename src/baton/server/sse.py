"""Server-sent events for one client: a bounded queue, heartbeats, overflow, disconnects.

:class:`EventStream` is an ASGI response that runs three tasks for its client and ends them
together: the *producer* pulls frames from the source into a queue of ``queue_size`` frames;
the *sender* writes them out (a comment line every ``heartbeat`` seconds of silence); the
*watcher* notices the client leaving. The source is read no faster than the client takes
frames, except that a queue which stays full for ``stall_seconds`` ends the stream: the
queued frames are dropped, the client gets a final ``event: overflow`` (with the last id it
was sent, to reconnect from) and the connection closes. A slow client therefore costs at
most one queue of memory and never slows the run (the session log falls back to reading the
store for a subscriber that lags).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Final

from starlette.types import Receive, Scope, Send

from baton.errors import BatonError

__all__ = ["OVERFLOW_GRACE_SECONDS", "EventStream", "Frame", "FrameCache", "StreamStats", "encode_frame"]

# After an overflow, how long the client has to take the frame it was stuck on and the notice.
OVERFLOW_GRACE_SECONDS: Final = 30.0

_HEADERS: Final = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_log = logging.getLogger("baton.server")
_HEARTBEAT: Final = b": keepalive\n\n"
_END: Final = object()
_MAX_BATCH: Final = 256  # frames in one write
_OVERFLOW: Final = object()


@dataclass(frozen=True)
class Frame:
    id: int
    data: bytes


def encode_frame(event_id: int | None, event: str, data: Any) -> bytes:
    """One SSE message; ``data`` is JSON on a single line."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"{head}event: {event}\ndata: {body}\n\n".encode()


class FrameCache:
    """Encoded frames shared by every client of a run: each is encoded once, sent to many.

    Keys are ``(run_id, view, id)``: an entry and an event are immutable once committed, so a
    frame never changes. Holds the most recently used frames up to ``max_bytes`` in all.
    """

    def __init__(self, max_bytes: int = 32 * 1024 * 1024) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._frames: OrderedDict[tuple[str, str, int], bytes] = OrderedDict()

    def frame(self, run_id: str, view: str, event_id: int, event: str, data: Any) -> bytes:
        key = (run_id, view, event_id)
        encoded = self._frames.get(key)
        if encoded is not None:
            self._frames.move_to_end(key)
            return encoded
        encoded = encode_frame(event_id, event, data)
        if len(encoded) <= self._max_bytes // 16:  # a huge frame is not worth evicting many
            self._frames[key] = encoded
            self._bytes += len(encoded)
            while self._bytes > self._max_bytes:
                _key, dropped = self._frames.popitem(last=False)
                self._bytes -= len(dropped)
        return encoded


@dataclass
class StreamStats:
    """Counters a test or an operator can read: streams open now, and how streams ended."""

    open: int = 0
    started: int = 0
    ended: int = 0
    overflowed: int = 0
    client_left: int = 0
    drained: int = 0  # ended by the server's shutdown


class EventStream:
    """An ASGI response streaming ``source()`` to one client (see the module docstring)."""

    def __init__(
        self,
        source: Callable[[], AsyncGenerator[Frame, None]],
        *,
        queue_size: int,
        stall_seconds: float,
        heartbeat_seconds: float,
        stats: StreamStats,
        draining: asyncio.Event,
    ) -> None:
        self._source = source
        self._queue: asyncio.Queue[Frame | object] = asyncio.Queue(queue_size)
        self._stall = stall_seconds
        self._heartbeat = heartbeat_seconds
        self._stats = stats
        self._draining = draining
        self._last_id: int | None = None
        self._overflowed = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._stats.open += 1
        self._stats.started += 1
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
            producer = asyncio.create_task(self._produce(), name="sse-produce")
            sender = asyncio.create_task(self._send_all(send), name="sse-send")
            watcher = asyncio.create_task(self._client_left(receive), name="sse-watch")
            drain = asyncio.create_task(self._draining.wait(), name="sse-drain")
            overflow = asyncio.create_task(self._overflowed.wait(), name="sse-overflow")
            tasks = (producer, sender, watcher, drain, overflow)
            ending = (sender, watcher, drain)
            try:
                done, _ = await asyncio.wait((*ending, overflow), return_when=asyncio.FIRST_COMPLETED)
                if not done & set(ending):  # overflowed: the notice gets a grace period, then we hang up
                    done, _ = await asyncio.wait(
                        ending, timeout=OVERFLOW_GRACE_SECONDS, return_when=asyncio.FIRST_COMPLETED
                    )
                if watcher in done:
                    self._stats.client_left += 1
                elif drain in done:
                    self._stats.drained += 1
            finally:
                for task in tasks:
                    task.cancel()
                results = await asyncio.gather(*tasks, return_exceptions=True)
            for result in results:
                if isinstance(result, Exception):
                    raise result
            if (sender in done and sender.result()) or drain in done:  # end the body cleanly
                with contextlib.suppress(OSError, TimeoutError):
                    async with asyncio.timeout(OVERFLOW_GRACE_SECONDS):
                        await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._stats.open -= 1
            self._stats.ended += 1

    async def _produce(self) -> None:
        try:
            async with aclosing(self._source()) as frames:
                async for frame in frames:
                    if not await self._put(frame):
                        return
        except Exception as exc:  # tell the client, end the stream; never a half-open connection
            _log.exception("an event stream's source failed")
            code = exc.code if isinstance(exc, BatonError) else "internal_error"
            error = {"code": code, "message": str(exc) if isinstance(exc, BatonError) else "see the server's log"}
            await self._put(Frame(-1, encode_frame(None, "error", {"error": error})))
        await self._put(_END)

    async def _put(self, item: Frame | object) -> bool:
        try:
            self._queue.put_nowait(item)
            return True
        except asyncio.QueueFull:
            pass
        try:
            async with asyncio.timeout(self._stall):
                await self._queue.put(item)
            return True
        except TimeoutError:
            pass
        # The client took nothing for stall_seconds: drop what waits and say so.
        while not self._queue.empty():
            self._queue.get_nowait()
        self._queue.put_nowait(_OVERFLOW)
        self._stats.overflowed += 1
        self._overflowed.set()
        return False

    async def _send_all(self, send: Send) -> bool:
        """Send frames until the end (True) or an overflow (True) or a dead client (False).

        Whatever waits in the queue goes out in one write: a client that fell behind catches
        up with fewer, larger writes instead of one system call per frame.
        """
        try:
            while True:
                items: list[Frame | object] = []
                if self._queue.empty():
                    try:
                        async with asyncio.timeout(self._heartbeat):
                            items.append(await self._queue.get())
                    except TimeoutError:
                        await send({"type": "http.response.body", "body": _HEARTBEAT, "more_body": True})
                        continue
                while not self._queue.empty() and len(items) < _MAX_BATCH:
                    items.append(self._queue.get_nowait())
                chunks: list[bytes] = []
                ending: object | None = None
                for item in items:
                    if item is _END or item is _OVERFLOW:
                        ending = item
                        break
                    assert isinstance(item, Frame)
                    chunks.append(item.data)
                    if item.id >= 0:
                        self._last_id = item.id
                if ending is _OVERFLOW:
                    notice = {"reason": "slow_client", "last_id": self._last_id}
                    chunks.append(encode_frame(None, "overflow", notice))
                if chunks:
                    await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": True})
                if ending is not None:
                    return True
        except OSError:
            return False

    @staticmethod
    async def _client_left(receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
