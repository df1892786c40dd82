"""A real baton server on 127.0.0.1 (a random port) in a thread, and an SSE reader for tests."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI

from baton.config import Settings
from baton.runs import Baton
from baton.server import BatonServer, ServerConfig, create_app
from baton.server.sse import StreamStats
from baton.server.state import ServerState

T = TypeVar("T")


@dataclass
class RunningServer:
    base_url: str
    state: ServerState
    loop: asyncio.AbstractEventLoop
    token: str | None
    app: FastAPI

    @property
    def baton(self) -> Baton:
        return self.state.baton

    @property
    def streams(self) -> StreamStats:
        return self.state.streams

    def call(self, work: Callable[[], Awaitable[T]], timeout: float = 30) -> T:
        """Run ``work()`` on the server's event loop (where its Baton lives) and return its result."""

        async def run() -> T:
            return await work()

        future: Future[T] = asyncio.run_coroutine_threadsafe(run(), self.loop)
        return future.result(timeout)

    async def acall(self, work: Callable[[], Awaitable[T]]) -> T:
        return await asyncio.to_thread(self.call, work)

    def headers(self, token: str | None = None) -> dict[str, str]:
        token = token or self.token
        return {"Authorization": f"Bearer {token}"} if token else {}


@contextmanager
def running_server(settings: Settings, config: ServerConfig | None = None) -> Iterator[RunningServer]:
    config = config or ServerConfig()
    app = create_app(settings, config)
    server = BatonServer(app, host="127.0.0.1", port=0, log_level="warning", max_header_bytes=config.max_header_bytes)
    loop = asyncio.new_event_loop()
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            loop.run_until_complete(server.serve())
        except BaseException as exc:  # startup failed: the test gets it
            failure.append(exc)
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    thread = threading.Thread(target=serve, name="baton-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if failure or not thread.is_alive():
            raise RuntimeError(f"the server did not start: {failure}")
        if time.monotonic() > deadline:
            raise TimeoutError("the server did not start in 30 s")
        time.sleep(0.01)
    token = None
    if not config.jwt_public_keys:
        token = (settings.home / "api-token").read_text().strip()
    try:
        yield RunningServer(f"http://127.0.0.1:{server.bound_port}", app.state.baton_server, loop, token, app)
    finally:
        server.should_exit = True
        thread.join(30)
        assert not thread.is_alive(), "the server did not stop"


@dataclass
class SseMessage:
    id: int | None
    event: str
    data: Any


@dataclass
class SseReader:
    """Parses ``text/event-stream`` lines; heartbeats (comment lines) are counted."""

    heartbeats: int = 0
    _fields: dict[str, str] = field(default_factory=dict)

    def feed(self, line: str) -> SseMessage | None:
        if line == "":
            if not self._fields:
                return None
            fields, self._fields = self._fields, {}
            raw_id = fields.get("id")
            event_id = int(raw_id) if raw_id else None
            return SseMessage(event_id, fields.get("event", "message"), json.loads(fields["data"]))
        if line.startswith(":"):
            self.heartbeats += 1
            return None
        name, _, value = line.partition(":")
        self._fields[name] = value[1:] if value.startswith(" ") else value
        return None


async def sse_messages(response: httpx.Response, reader: SseReader | None = None) -> AsyncIterator[SseMessage]:
    reader = reader or SseReader()
    async for line in response.aiter_lines():
        message = reader.feed(line)
        if message is not None:
            yield message


async def read_stream(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    *,
    stop_after: int | None = None,
    received: list[SseMessage] | None = None,
) -> list[SseMessage]:
    """Every message of the stream until the server closes it (or ``stop_after`` messages),
    appended to ``received`` as they come when one is given (a caller watching progress)."""
    received = [] if received is None else received
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for message in sse_messages(response):
            received.append(message)
            if stop_after is not None and len(received) >= stop_after:
                break
    return received


def wait_until(condition: Callable[[], bool], timeout: float = 10, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


# JWT keys and tokens.


@dataclass(frozen=True)
class KeyPair:
    private: rsa.RSAPrivateKey
    public_pem: bytes

    def write_public(self, path: Path) -> Path:
        path.write_bytes(self.public_pem)
        return path

    def private_pem(self) -> bytes:
        return self.private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


def make_key_pair() -> KeyPair:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return KeyPair(private, public_pem)


def sign(
    key: KeyPair,
    *,
    sub: str | None = "alice",
    scope: str = "runs:read runs:write",
    aud: str | None = "baton",
    kid: str | None = None,
    ttl: float = 600,
    **claims: Any,
) -> str:
    now = int(time.time())
    body: dict[str, Any] = {"iat": now, "exp": now + ttl, "scope": scope}
    if sub is not None:
        body["sub"] = sub
    if aud is not None:
        body["aud"] = aud
    body.update(claims)
    return jwt.encode(body, key.private, algorithm="RS256", headers={"kid": kid} if kid else None)
