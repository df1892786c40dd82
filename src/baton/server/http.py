"""Serving the application with uvicorn, so that shutdown also ends the event streams.

uvicorn waits for open connections before it shuts the application down, and an event stream
never ends by itself: :class:`BatonServer` tells the streams to end first. uvicorn's main loop
looks at ``should_exit`` every 0.1 s (most of an idle server's CPU); :class:`BatonServer`'s
waits until ``should_exit`` is set (it wakes the loop) or a second passes (the date header).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Callable
from types import FrameType
from typing import Any

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from baton.errors import RefusedError

__all__ = ["BatonServer", "HttpProtocol"]


class HttpProtocol(H11Protocol):
    """uvicorn's h11 protocol, answering a request line and headers over the limit with 431.

    h11 refuses a request whose head outgrows ``h11_max_incomplete_event_size`` (it hints 431);
    uvicorn would answer any refusal of h11 with a plain-text 400. Every other refusal keeps
    uvicorn's answer.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refusal_status = 400
        next_event = self.conn.next_event

        def watched() -> Any:
            try:
                return next_event()
            except h11.RemoteProtocolError as exc:
                self._refusal_status = exc.error_status_hint
                raise

        self.conn.next_event = watched  # type: ignore[method-assign]

    def send_400_response(self, msg: str) -> None:
        if self._refusal_status != 431:
            super().send_400_response(msg)
            return
        limit = self.config.h11_max_incomplete_event_size
        error = RefusedError("headers_too_large", f"the request line and headers are larger than {limit} bytes")
        body = json.dumps({"error": error.to_dict()}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        self.transport.write(self.conn.send(h11.Response(status_code=431, headers=headers)))
        self.transport.write(self.conn.send(h11.Data(data=body)))
        self.transport.write(self.conn.send(h11.EndOfMessage()))
        self.transport.close()


class BatonServer(uvicorn.Server):
    def __init__(
        self, app: FastAPI, *, host: str, port: int, log_level: str = "info", max_header_bytes: int = 64 * 1024
    ) -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            lifespan="on",
            log_level=log_level,
            access_log=False,
            timeout_graceful_shutdown=5,
            server_header=False,
            http=HttpProtocol,
            h11_max_incomplete_event_size=max_header_bytes,
        )
        self._exit_asked: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        super().__init__(config)
        self._draining: asyncio.Event = app.state.draining
        # Called with the bound port once the socket listens, before any request is served.
        self.on_listening: Callable[[int], None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.on_listening is not None and self.started:
            self.on_listening(self.bound_port)

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        # Set from a signal handler or another thread (tests, benchmarks): wake main_loop.
        self._should_exit = value
        if value and self._loop is not None and self._exit_asked is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                self._loop.call_soon_threadsafe(self._exit_asked.set)

    async def main_loop(self) -> None:
        """uvicorn's, without its 0.1 s tick: on_tick once a second (it refreshes the date header
        when its counter is a multiple of 10) and as soon as ``should_exit`` is set."""
        self._exit_asked, self._loop = asyncio.Event(), asyncio.get_running_loop()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 10) % 864000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._exit_asked.wait()

    @property
    def bound_port(self) -> int:
        """The port listened on (``port=0`` picks a free one)."""
        sockname = self.servers[0].sockets[0].getsockname()
        return int(sockname[1])

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # SIGINT or SIGTERM asks for a graceful stop, after which `baton serve` exits 0
        # (uvicorn would raise the signal again once it is done).
        captured = getattr(self, "_captured_signals", None)
        if isinstance(captured, list):
            captured.clear()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._draining.set()
        await super().shutdown(sockets)
