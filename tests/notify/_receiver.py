"""A webhook receiver on 127.0.0.1 for tests: records every POST, fails the first N of each delivery."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from baton.notify import DELIVERY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, verify


@dataclass(frozen=True)
class Received:
    body: bytes
    headers: dict[str, str]
    status: int

    @property
    def delivery(self) -> str:
        return self.headers[DELIVERY_HEADER]

    def verified(self, secret: str) -> bool:
        return verify(secret, self.body, self.headers.get(SIGNATURE_HEADER), self.headers.get(TIMESTAMP_HEADER))


@dataclass
class Receiver:
    url: str
    fail_first: int = 0  # each delivery id is answered 500 this many times, then 204
    delay: float = 0.0  # seconds before answering
    received: list[Received] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def handle(self, body: bytes, headers: dict[str, str]) -> int:
        time.sleep(self.delay)
        with self._changed:
            earlier = sum(
                1 for got in self.received if got.headers.get(DELIVERY_HEADER) == headers.get(DELIVERY_HEADER)
            )
            status = 500 if earlier < self.fail_first else 204
            self.received.append(Received(body, headers, status))
            self._changed.notify_all()
        return status

    def wait_for(self, predicate: Any, timeout: float = 20) -> list[Received]:
        """The requests so far, once ``predicate(requests)`` holds (AssertionError after ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.received):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the receiver got {[got.delivery for got in self.received]}")
                self._changed.wait(left)
            return list(self.received)

    def delivered(self) -> list[Received]:
        with self._changed:
            return [got for got in self.received if got.status == 204]


@contextmanager
def receiver(fail_first: int = 0, delay: float = 0.0) -> Iterator[Receiver]:
    state: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status = state[0].handle(body, dict(self.headers.items()))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.append(Receiver(f"http://127.0.0.1:{server.server_address[1]}/hook", fail_first, delay))
    thread = threading.Thread(target=server.serve_forever, name="webhook-receiver", daemon=True)
    thread.start()
    try:
        yield state[0]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
