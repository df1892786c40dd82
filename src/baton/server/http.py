"""Serving the application with uvicorn, so that shutdown also ends the event streams.

uvicorn waits for open connections before it shuts the application down, and an event stream
never ends by itself: :class:`BatonServer` tells the streams to end first.
"""

from __future__ import annotations

import asyncio
import socket
from types import FrameType

import uvicorn
from fastapi import FastAPI

__all__ = ["BatonServer"]


class BatonServer(uvicorn.Server):
    def __init__(self, app: FastAPI, *, host: str, port: int, log_level: str = "info") -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            lifespan="on",
            log_level=log_level,
            access_log=False,
            timeout_graceful_shutdown=5,
            server_header=False,
        )
        super().__init__(config)
        self._draining: asyncio.Event = app.state.draining

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
