"""A loopback HTTP proxy in front of the S3 server that breaks what a test asks it to break.

It forwards every request as received (the ``Host`` header too, so the client's SigV4
signature still holds at the server) and, while a test has armed it: answers ``503 SlowDown``
instead of forwarding, sends only the first half of an object's body and drops the connection,
or flips one byte of an object's body. It records each request line with its ``Range`` header.
"""

from __future__ import annotations

import http.client
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

__all__ = ["Faults", "faulty_proxy"]

_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>'
    b"<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>"
)
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "expect", "date", "server"})


@dataclass
class Faults:
    """How many of the coming requests (or object GETs) to break, and what was seen."""

    unavailable: int = 0
    cut: int = 0
    flip: int = 0
    seen: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, name: str) -> bool:
        with self._lock:
            left = getattr(self, name)
            if left:
                setattr(self, name, left - 1)
            return bool(left)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream: ClassVar[tuple[str, int]]
    faults: ClassVar[Faults]

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        self.faults.seen.append(f"{self.command} {self.path} range={self.headers.get('Range')}")
        if self.faults.take("unavailable"):
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(_SLOW_DOWN)))
            self.end_headers()
            self.wfile.write(_SLOW_DOWN)
            return
        upstream = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
        finally:
            upstream.close()
        is_object = self.command == "GET" and response.status in (200, 206) and "/sha256/" in self.path
        if is_object and data and self.faults.take("flip"):
            middle = len(data) // 2
            data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
        cut = is_object and len(data) > 1 and self.faults.take("cut")
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data[: len(data) // 2] if cut else data)
        if cut:
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up on a cut connection is what these tests make happen


@contextmanager
def faulty_proxy(endpoint: str) -> Iterator[tuple[str, Faults]]:
    """A proxy to ``endpoint`` on a free loopback port: yields its URL and its :class:`Faults`."""
    target = urllib.parse.urlsplit(endpoint)
    faults = Faults()
    handler = type("Handler", (_Handler,), {"upstream": (target.hostname, target.port), "faults": faults})
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", faults
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
