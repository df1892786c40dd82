"""A run's ``BATON_PORT_BASE`` ports forwarded from the host into its sandbox's network namespace
(docs/sandbox.md "Ports from the host").

Under bubblewrap's ``--unshare-net`` a dev server the agent starts on ``127.0.0.1:PORT`` listens
on the namespace's own loopback, which the host cannot reach. :class:`PortForwarder` listens on
the host's ``127.0.0.1`` at each of the run's ports and, per connection, opens a connection to
the same port inside the namespace and relays bytes both ways until either side closes.

The connection inside is a socket **made in the namespace** (a socket keeps the namespace it was
made in): :class:`NamespaceSockets` owns one thread that entered the namespace (``setns``, which
takes ``CAP_SYS_ADMIN``: the ``setns`` method of baton.sandbox.netns) and makes every socket
there; baton's event loop connects and relays them as any other. With the ``inside`` method
(baton unprivileged) baton cannot enter the namespace, and the ports are not forwarded (the run
says so in ``_baton/ports``).

The forwarder follows the newest namespace it is given (a run's setup step and its agent each
run in a bubblewrap of their own) and closes with the run's network.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import socket
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["PORT_BASE_VARIABLE", "NamespaceSockets", "PortForwarder"]

# The first of the run's ports, in its agent's and its setup's environment (docs/workspaces.md).
PORT_BASE_VARIABLE = "BATON_PORT_BASE"
_CLONE_NEWNET = 0x40000000
_CHUNK = 65536
_log = logging.getLogger(__name__)


def _enter(namespace_fd: int) -> None:
    """A pool thread's initializer: enter the namespace, for good (the thread is the pool's only one)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(namespace_fd, _CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _new_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    return sock


class NamespaceSockets:
    """Sockets made inside one network namespace (``namespace_fd``: an open ``/proc/PID/ns/net``,
    owned from here on) by a thread of its own that entered it and never leaves."""

    def __init__(self, namespace_fd: int) -> None:
        self._fd = namespace_fd
        self._thread = ThreadPoolExecutor(1, "baton-netns-forward", initializer=_enter, initargs=(namespace_fd,))

    async def connect(self, port: int) -> socket.socket:
        """A connection to ``127.0.0.1:port`` of the namespace (``OSError`` when nothing listens)."""
        loop = asyncio.get_running_loop()
        sock = await loop.run_in_executor(self._thread, _new_socket)
        try:
            await loop.sock_connect(sock, ("127.0.0.1", port))
        except BaseException:
            sock.close()
            raise
        return sock

    def close(self) -> None:
        self._thread.shutdown(wait=False)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class PortForwarder:
    """Listens on the host's ``127.0.0.1`` at ``ports``; each connection is relayed to the same port
    in the namespace :meth:`target` names (refused — closed at once — while there is none)."""

    def __init__(self, ports: Sequence[int]) -> None:
        self.ports = tuple(ports)
        self.listening: list[int] = []  # the ports the host side listens on
        self.unavailable: dict[int, str] = {}  # a port the host side could not take, and why
        self._servers: list[asyncio.Server] = []
        self._target: NamespaceSockets | None = None
        self._relays: set[asyncio.Task[None]] = set()
        self._closed = False

    async def start(self) -> None:
        """Listen on every port the host lets baton take (the others are in :attr:`unavailable`)."""
        for port in self.ports:
            try:
                server = await asyncio.start_server(self._accepted, "127.0.0.1", port, reuse_address=True)
            except OSError as exc:
                self.unavailable[port] = exc.strerror or str(exc)
                continue
            self._servers.append(server)
            self.listening.append(port)

    def target(self, sockets: NamespaceSockets) -> None:
        """Forward new connections into this namespace from now on (the previous one is closed)."""
        previous, self._target = self._target, sockets
        if previous is not None:
            previous.close()
        if self._closed:
            sockets.close()
            self._target = None

    def describe(self) -> dict[str, Any]:
        body: dict[str, Any] = {"forwarded": list(self.listening)}
        if self.unavailable:
            body["unavailable"] = {str(port): why for port, why in self.unavailable.items()}
        return body

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        try:
            port = writer.get_extra_info("sockname")[1]
            target = self._target
            if target is None:
                return
            try:
                inner = await target.connect(port)
            except OSError:
                return  # nothing listens there in the sandbox: the host's client sees the connection close
            inner_reader, inner_writer = await asyncio.open_connection(sock=inner)
            try:
                await asyncio.gather(_pipe(reader, inner_writer), _pipe(inner_reader, writer))
            finally:
                inner_writer.close()
        except Exception:
            _log.debug("a forwarded connection failed", exc_info=True)
        finally:
            writer.close()
            self._relays.discard(task)

    async def aclose(self) -> None:
        """Stop listening, end every relayed connection, let go of the namespace (idempotent)."""
        self._closed = True
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        relays, self._relays = set(self._relays), set()
        for relay in relays:
            relay.cancel()
        for relay in relays:
            with contextlib.suppress(BaseException):
                await relay
        for server in servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()
        target, self._target = self._target, None
        if target is not None:
            target.close()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until ``source`` ends, then half-close ``sink`` (the other direction may go on)."""
    try:
        while data := await source.read(_CHUNK):
            sink.write(data)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
    except (ConnectionError, OSError):
        sink.close()
