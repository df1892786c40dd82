"""A loopback HTTP(S) server each test scripts: what the proxies forward to.

Unlike the scripted model server it records requests exactly as they arrived (credentials
included, so a test can see the real key reached the endpoint) and lets a test answer at its
own pace (one SSE event, then wait for the test) or not at all, and see the proxy hang up.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from baton.sandbox.proxy_http import Headers, body_framing, header, iter_body, parse_request, read_head


@dataclass
class Seen:
    method: str
    target: str
    headers: Headers
    body: bytes
    connection: int  # which connection (0, 1, …) carried it

    def header(self, name: str) -> str | None:
        return header(self.headers, name)


Answer = Callable[[Seen, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def answer_ok(seen: Seen, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    body = b'{"ok": true}'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    writer.write(head + body)
    await writer.drain()


@dataclass
class Upstream:
    answer: Answer = answer_ok
    ssl_context: ssl.SSLContext | None = None
    seen: list[Seen] = field(default_factory=list)
    connections: int = 0
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)  # a peer closed a connection
    arrived: asyncio.Event = field(default_factory=asyncio.Event)  # a request arrived
    _server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number, self.connections = self.connections, self.connections + 1
        try:
            while (raw := await read_head(reader)) is not None:
                head = parse_request(raw)
                body = b"".join([piece async for piece in iter_body(reader, body_framing(head.headers))])
                seen = Seen(head.method, head.target, head.headers, body, number)
                self.seen.append(seen)
                self.arrived.set()
                await self.answer(seen, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            self.hung_up.set()
            writer.close()

    async def wait_hung_up(self) -> None:
        """Until the proxy closes its connection (the request it was waiting on is abandoned)."""
        await asyncio.wait_for(self.hung_up.wait(), 10)
