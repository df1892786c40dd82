"""Request limits: the head size (431 ``headers_too_large``), the body size (413
``body_too_large``), the rate of commands and decisions of one caller (429 ``rate_limited``),
open event streams per run and per caller (429 ``sse_limit``)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.errors import RefusedError

__all__ = ["BodyLimit", "RateLimiter", "StreamSlots"]

_MAX_CALLERS: Final = 10_000


class RateLimiter:
    """A token bucket per caller: ``per_minute`` calls a minute, in bursts of up to ``per_minute``."""

    def __init__(self, per_minute: int) -> None:
        self._capacity = float(per_minute)
        self._rate = per_minute / 60.0
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, caller: str) -> None:
        now = time.monotonic()
        tokens, last = self._buckets.get(caller, (self._capacity, now))
        tokens = min(self._capacity, tokens + (now - last) * self._rate)
        if tokens < 1:
            retry = math.ceil((1 - tokens) / self._rate)
            raise RefusedError("rate_limited", f"too many commands; retry in {retry} s", details={"retry_after": retry})
        self._buckets[caller] = (tokens - 1, now)
        if len(self._buckets) > _MAX_CALLERS:  # forget callers whose bucket has refilled
            horizon = now - self._capacity / self._rate
            self._buckets = {key: value for key, value in self._buckets.items() if value[1] > horizon}


class StreamSlots:
    """Counts open event streams per run and per caller; ``acquire`` refuses past the limits."""

    def __init__(self, per_run: int, per_caller: int) -> None:
        self._per_run = per_run
        self._per_caller = per_caller
        self._runs: dict[str, int] = {}
        self._callers: dict[str, int] = {}

    def acquire(self, run_id: str, caller: str) -> Callable[[], None]:
        """A slot for one stream, or ``sse_limit``; call the result exactly once when it ends."""
        if self._runs.get(run_id, 0) >= self._per_run:
            raise RefusedError("sse_limit", f"run {run_id} has {self._per_run} open event streams already")
        if self._callers.get(caller, 0) >= self._per_caller:
            raise RefusedError("sse_limit", f"this caller has {self._per_caller} open event streams already")
        self._runs[run_id] = self._runs.get(run_id, 0) + 1
        self._callers[caller] = self._callers.get(caller, 0) + 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            for counts, key in ((self._runs, run_id), (self._callers, caller)):
                counts[key] -= 1
                if not counts[key]:
                    del counts[key]

        return release


class BodyLimit:
    """Refuses headers over ``max_header_bytes`` (431 ``headers_too_large``) and a body over
    ``max_bytes`` (413): at once by its Content-Length, else as it streams in.

    uvicorn's h11 protocol (``HttpProtocol``) refuses a head that arrives in pieces past the
    same limit; a head that arrives whole is measured here.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, max_header_bytes: int = 64 * 1024) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_header_bytes = max_header_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        head += sum(len(name) + len(value) + 4 for name, value in scope["headers"])
        if head > self.max_header_bytes:
            error = RefusedError(
                "headers_too_large", f"the request line and headers are larger than {self.max_header_bytes} bytes"
            )
            await _refuse(send, 431, error)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    await self._refuse(send)
                    return
        seen = 0
        exceeded = False
        replaced = False

        async def limited() -> Message:
            nonlocal seen, exceeded
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    exceeded = True
                    raise self._error()
            return message

        async def answer(message: Message) -> None:
            # However the application handled the failed read, the client is told why.
            nonlocal replaced
            if replaced:
                return
            if exceeded and message["type"] == "http.response.start":
                replaced = True
                await self._refuse(send)
                return
            await send(message)

        await self.app(scope, limited, answer)

    def _error(self) -> RefusedError:
        return RefusedError("body_too_large", f"the request body is larger than {self.max_bytes} bytes")

    async def _refuse(self, send: Send) -> None:
        await _refuse(send, 413, self._error())


async def _refuse(send: Send, status: int, error: RefusedError) -> None:
    body = json.dumps({"error": error.to_dict()}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
