"""Where a proxy listens: a Unix socket (bound into a sandbox), a loopback TCP port, a listening
socket made elsewhere (``sock``: one created inside the sandbox's network namespace keeps
belonging to it, so the agent reaches the proxy on its own loopback with no relay), or several.

:class:`ProxyListener` owns its servers and every connection's task: ``aclose()`` (or leaving
``async with``) stops listening, cancels the connections still open, removes the socket file,
and is idempotent; a closed listener does not start again.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path
from types import TracebackType
from typing import Self

from baton.errors import UsageError

__all__ = ["ProxyListener"]

_log = logging.getLogger("baton.sandbox")


class ProxyListener:
    """Serve each connection with :meth:`_serve` until closed; subclasses say what serving is."""

    def __init__(
        self,
        *,
        unix_path: Path | None = None,
        tcp: tuple[str, int] | None = None,
        sock: socket.socket | None = None,
        limit: int,
    ) -> None:
        if unix_path is None and tcp is None and sock is None:
            raise UsageError("invalid_argument", "a proxy listens on a Unix socket, a TCP address or a given socket")
        self._unix_path = unix_path
        self._tcp = tcp
        self._sock = sock  # listening already; the proxy owns it from now on
        self._limit = limit
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._state = "new"

    @property
    def tcp_address(self) -> tuple[str, int]:
        """The TCP (host, port) listened on; the port is the real one when 0 was asked."""
        for server in self._servers:
            for sock in server.sockets:
                if sock.family in (socket.AF_INET, socket.AF_INET6):
                    host, port = sock.getsockname()[:2]
                    return str(host), int(port)
        raise RuntimeError("this proxy listens on no TCP address (or is not started)")

    @property
    def unix_path(self) -> Path:
        if self._unix_path is None or self._state != "open":
            raise RuntimeError("this proxy listens on no Unix socket (or is not started)")
        return self._unix_path

    async def start(self) -> Self:
        if self._state != "new":
            raise RuntimeError("a proxy starts once")
        self._state = "open"
        try:
            if self._unix_path is not None:
                server = await asyncio.start_unix_server(self._connection, path=self._unix_path, limit=self._limit)
                self._servers.append(server)
                self._unix_path.chmod(0o600)  # only baton (and what it binds the socket into) connects
            if self._tcp is not None:
                host, port = self._tcp
                self._servers.append(await asyncio.start_server(self._connection, host, port, limit=self._limit))
            if self._sock is not None:
                serve = asyncio.start_unix_server if self._sock.family == socket.AF_UNIX else asyncio.start_server
                self._servers.append(await serve(self._connection, sock=self._sock, limit=self._limit))
        except OSError as exc:
            await self.aclose()
            raise UsageError("invalid_argument", f"the proxy cannot listen: {exc}") from exc
        return self

    async def aclose(self) -> None:
        if self._state == "closed":
            return
        self._state = "closed"
        for server in self._servers:
            server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        if self._unix_path is not None:
            self._unix_path.unlink(missing_ok=True)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
            writer.close()  # what was written still goes out
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            writer.transport.abort()  # the peer went away: ordinary for a proxy
        except asyncio.CancelledError:
            writer.transport.abort()
            if self._state != "closed":
                raise
            # Closing: end quietly (asyncio's stream callback would report a cancelled task as an error).
        except Exception:
            writer.transport.abort()
            _log.exception("a proxy connection failed")
        finally:
            self._connections.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError
