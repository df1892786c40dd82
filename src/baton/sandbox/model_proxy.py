"""The model proxy: the one way a sandboxed agent reaches its model endpoint.

An HTTP/1.1 reverse proxy on a Unix socket and/or a loopback TCP port that forwards every
request to the configured endpoint (HTTP or HTTPS, verified against a CA bundle) and streams
the answer back piece by piece as it arrives (SSE included), over keep-alive connections to
the endpoint that are reused.

The credential rule: the agent is given :attr:`ModelProxy.placeholder`, never the real key.
Wherever a request carries a key — ``x-api-key``, ``authorization: Bearer``,
``x-goog-api-key`` or a ``key=`` query parameter — it must be the placeholder (else 401
``token_invalid``), and the proxy puts the real key in its place; a request carrying no key
is forwarded with none. What the observer sees is redacted.

Errors the agent sees are JSON (``proxy_http.error_answer``) with a stable code: 400
``request_invalid``, 401 ``token_invalid``, 413 ``body_too_large``, 431
``headers_too_large``; 502 ``upstream_unreachable``, ``upstream_tls``, ``upstream_failed``
when the endpoint fails before answering (after the head, the agent's connection is cut
instead). When the agent goes away, the request to the endpoint is abandoned at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import socket
import ssl
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from baton.errors import AuthError, BatonError, UpstreamError, UsageError
from baton.sandbox.proxy_hooks import REDACTED, ExchangeOutcome, ModelChunk, ModelExchange, ModelObserver
from baton.sandbox.proxy_http import (
    BodyFraming,
    Headers,
    RequestHead,
    ResponseHead,
    body_framing,
    encode_chunk,
    error_answer,
    iter_body,
    parse_request,
    parse_response,
    read_head,
    read_request_body,
    serialize_head,
    without_hop_by_hop,
)
from baton.sandbox.proxy_listener import ProxyListener

__all__ = ["ModelProxy", "ModelUpstream", "new_placeholder_key"]

_log = logging.getLogger("baton.sandbox")
_KEY_HEADERS = frozenset({"x-api-key", "x-goog-api-key"})
_SECRET_HEADERS = _KEY_HEADERS | {"authorization", "proxy-authorization", "cookie"}
_NOT_FORWARDED = frozenset({"host", "content-length", "accept-encoding", "expect"})
_STATUS = {"request_invalid": 400, "body_too_large": 413, "headers_too_large": 431}
_HEAD_LIMIT = 1 << 16
_IDLE_CONNECTIONS = 8


def new_placeholder_key() -> str:
    """A fresh placeholder for the agent's environment: looks like a key, opens nothing."""
    return "sk-baton-placeholder-" + secrets.token_hex(16)


@dataclass(frozen=True)
class ModelUpstream:
    """The endpoint the proxy forwards to, and the real key it adds."""

    url: str  # e.g. https://api.anthropic.com (a path prefix is kept: https://host/api)
    api_key: str = field(default="", repr=False)  # "" when the endpoint wants none
    ca_bundle: Path | None = None  # PEM certificates to trust; None: the system's
    connect_timeout: float = 10.0

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError("config_invalid", f"the model endpoint must be an http(s) URL, not {self.url!r}")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise UsageError("config_invalid", "the model endpoint URL carries no credentials, query or fragment")

    @property
    def tls(self) -> bool:
        return urlsplit(self.url).scheme == "https"

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        parts = urlsplit(self.url)
        return parts.port or (443 if self.tls else 80)

    @property
    def authority(self) -> str:
        """The ``Host`` header: the netloc as written (a default port left out)."""
        return urlsplit(self.url).netloc

    @property
    def base_path(self) -> str:
        return urlsplit(self.url).path.rstrip("/")


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def close(self) -> None:
        self.writer.transport.abort()


class ModelProxy(ProxyListener):
    """``async with ModelProxy(ModelUpstream(url, key), tcp=("127.0.0.1", 0)) as proxy: ...``"""

    def __init__(
        self,
        upstream: ModelUpstream,
        *,
        unix_path: Path | None = None,
        tcp: tuple[str, int] | None = None,
        sock: socket.socket | None = None,
        placeholder: str | None = None,
        observer: ModelObserver | None = None,
        body_limit: int = 64 << 20,
    ) -> None:
        super().__init__(unix_path=unix_path, tcp=tcp, sock=sock, limit=_HEAD_LIMIT)
        self.upstream = upstream
        self.placeholder = placeholder or new_placeholder_key()
        self._observer = observer
        self._body_limit = body_limit
        self._ssl = _client_context(upstream.ca_bundle) if upstream.tls else None
        self._idle: list[_Connection] = []

    async def aclose(self) -> None:
        await super().aclose()
        while self._idle:
            self._idle.pop().close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pending = b""
        while True:
            head: RequestHead | None = None
            body = b""
            try:
                raw = await read_head(reader, pending)
                if raw is None:
                    return
                started, clock = time.time(), time.perf_counter()
                head = parse_request(raw)
                body = await read_request_body(reader, head, limit=self._body_limit)
                request = self._upstream_request(head, body)
            except BatonError as error:
                writer.write(error_answer(401 if isinstance(error, AuthError) else _STATUS.get(error.code, 400), error))
                await writer.drain()
                if head is not None:
                    self._observe(head, body, started, clock, _Result("refused", error_code=error.code))
                return
            result = _Result("completed", chunks=[] if self._observer is not None else None)
            try:
                await self._exchange(reader, writer, head, request, clock, result)
            except asyncio.CancelledError:  # closing: an answer the agent got whole is still observed
                if result.answered:
                    self._observe(head, body, started, clock, result)
                raise
            self._observe(head, body, started, clock, result)
            if not (result.keep_alive and head.keep_alive):
                return
            pending = result.pending

    def _upstream_request(self, head: RequestHead, body: bytes) -> bytes:
        if not head.target.startswith("/"):
            raise UsageError("request_invalid", "the model proxy takes origin-form targets (/v1/...)")
        headers: Headers = [("Host", self.upstream.authority)]
        for name, value in without_hop_by_hop(head.headers):
            lower = name.lower()
            if lower in _NOT_FORWARDED:
                continue
            if lower in _KEY_HEADERS or lower == "authorization":
                value = self._real_key_for(lower, value)
                if not value:
                    continue
            headers.append((name, value))
        if body or head.method in ("POST", "PUT", "PATCH"):
            headers.append(("Content-Length", str(len(body))))
        headers.append(("Accept-Encoding", "identity"))  # the observer and recorder read the stream as is
        target = self.upstream.base_path + self._real_query(head.target)
        return serialize_head(f"{head.method} {target} HTTP/1.1", headers) + body

    def _real_key_for(self, name: str, value: str) -> str:
        """The header's value with the real key in place of the placeholder ("" to drop it)."""
        if name == "authorization":
            scheme, _, token = value.partition(" ")
            if scheme.lower() != "bearer":
                raise AuthError("token_invalid", "the model proxy takes a Bearer token (the sandbox's placeholder)")
            self._check(token.strip())
            return f"Bearer {self.upstream.api_key}" if self.upstream.api_key else ""
        self._check(value)
        return self.upstream.api_key

    def _real_query(self, target: str) -> str:
        path, question, query = target.partition("?")
        if not question:
            return target
        params = query.split("&")
        for index, param in enumerate(params):
            name, _, value = param.partition("=")
            if name == "key":
                self._check(unquote(value))
                params[index] = f"key={self.upstream.api_key}"
        return f"{path}?{'&'.join(params)}"

    def _check(self, key: str) -> None:
        if not hmac.compare_digest(key.encode(), self.placeholder.encode()):
            raise AuthError("token_invalid", "the request's key is not this sandbox's placeholder")

    async def _exchange(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        head: RequestHead,
        request: bytes,
        clock: float,
        result: _Result,
    ) -> None:
        """Forward one request while watching the agent's connection: its EOF abandons the request."""
        forward = asyncio.ensure_future(self._forward(writer, head.method, request, clock, result))
        watch = asyncio.ensure_future(reader.read(1))
        try:
            done, _ = await asyncio.wait({forward, watch}, return_when=asyncio.FIRST_COMPLETED)
            if watch in done:
                data = b"" if watch.exception() else watch.result()
                if not data:
                    result.keep_alive = False
                    if forward not in done:  # gone before its answer was whole
                        result.outcome, result.error_code = "client_gone", "client_gone"
                        return
                result.pending = data  # the next request has begun (pipelining): keep its first byte
            await forward
        except ConnectionError:
            result.outcome, result.error_code, result.keep_alive = "client_gone", "client_gone", False
        finally:
            for task in (forward, watch):
                task.cancel()
            await asyncio.gather(forward, watch, return_exceptions=True)

    async def _forward(
        self, client: asyncio.StreamWriter, method: str, request: bytes, clock: float, result: _Result
    ) -> None:
        try:
            connection, response, framing = await self._send(request, method)
        except UpstreamError as error:
            client.write(error_answer(502, error))
            await client.drain()
            result.outcome, result.error_code, result.status = "upstream_error", error.code, 502
            result.keep_alive = False
            return
        try:
            headers = [(k, v) for k, v in without_hop_by_hop(response.headers) if k.lower() != "content-length"]
            chunked = framing.kind in ("chunked", "close")
            if framing.kind == "length":
                headers.append(("Content-Length", str(framing.length)))
            elif chunked:
                headers.append(("Transfer-Encoding", "chunked"))
            # The head goes out with the body's first piece: one send (and one wake-up of the agent) less.
            unsent = serialize_head(f"HTTP/1.1 {response.status} {response.reason}", headers)
            result.status, result.response_headers = response.status, headers
            async with contextlib.aclosing(_upstream_body(connection.reader, framing)) as pieces:
                async for data in pieces:
                    client.write(unsent + (encode_chunk(data) if chunked else data))
                    unsent = b""
                    if result.chunks is not None:
                        result.chunks.append(ModelChunk(time.perf_counter() - clock, data))
                    await client.drain()
            client.write(unsent + (b"0\r\n\r\n" if chunked else b""))
            await client.drain()
            result.answered = True
        except UpstreamError as error:
            connection.close()
            result.outcome, result.error_code, result.keep_alive = "upstream_error", error.code, False
            if unsent:  # nothing reached the agent yet: it can still be told plainly
                client.write(error_answer(502, error))
                await client.drain()
                result.status, result.response_headers = 502, []
            else:
                client.transport.abort()  # the head is out: a cut connection is how the agent learns
            return
        except BaseException:
            connection.close()
            raise
        if framing.kind != "close" and response.keep_alive and len(self._idle) < _IDLE_CONNECTIONS:
            self._idle.append(connection)
        else:
            connection.close()

    async def _send(self, request: bytes, method: str) -> tuple[_Connection, ResponseHead, BodyFraming]:
        """The response head and how its body ends; a pooled connection the endpoint had closed is replaced."""
        while True:
            connection = self._take_idle()
            reused = connection is not None
            if connection is None:
                connection = await self._connect()
            try:
                connection.writer.write(request)
                await connection.writer.drain()
                while True:
                    raw = await read_head(connection.reader)
                    if raw is None:
                        raise ConnectionResetError("the endpoint closed the connection without answering")
                    response = parse_response(raw)
                    if not 100 <= response.status < 200:
                        return (
                            connection,
                            response,
                            body_framing(response.headers, response_to=method, status=response.status),
                        )
            except (OSError, asyncio.IncompleteReadError) as exc:
                connection.close()
                if reused:
                    continue
                raise UpstreamError("upstream_failed", f"{self.upstream.authority}: {exc}") from exc
            except BatonError as exc:
                connection.close()
                message = f"{self.upstream.authority} answered badly: {exc.message}"
                raise UpstreamError("upstream_failed", message) from exc
            except BaseException:
                connection.close()
                raise

    def _take_idle(self) -> _Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if not connection.reader.at_eof() and not connection.writer.is_closing():
                return connection
            connection.close()
        return None

    async def _connect(self) -> _Connection:
        upstream = self.upstream
        try:
            async with asyncio.timeout(upstream.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    upstream.host,
                    upstream.port,
                    ssl=self._ssl,
                    server_hostname=upstream.host if self._ssl else None,
                    limit=_HEAD_LIMIT,
                )
        except ssl.SSLError as exc:
            raise UpstreamError("upstream_tls", f"TLS with {upstream.authority} failed: {exc}") from exc
        except TimeoutError as exc:
            message = f"{upstream.authority} accepted no connection within {upstream.connect_timeout} s"
            raise UpstreamError("upstream_unreachable", message) from exc
        except OSError as exc:
            raise UpstreamError("upstream_unreachable", f"{upstream.authority}: {exc.strerror or exc}") from exc
        return _Connection(reader, writer)

    def _observe(self, head: RequestHead, body: bytes, started: float, clock: float, result: _Result) -> None:
        if self._observer is None:
            return
        exchange = ModelExchange(
            method=head.method,
            path=_redacted_target(head.target),
            headers=tuple((k, REDACTED if k.lower() in _SECRET_HEADERS else v) for k, v in head.headers),
            body=body,
            started=started,
            outcome=result.outcome,
            status=result.status,
            response_headers=tuple(result.response_headers),
            chunks=tuple(result.chunks or ()),
            error_code=result.error_code,
            duration=time.perf_counter() - clock,
        )
        try:
            self._observer.exchange(exchange)
        except Exception:
            _log.exception("the model proxy's observer failed")


@dataclass
class _Result:
    outcome: ExchangeOutcome
    status: int | None = None
    response_headers: Headers = field(default_factory=list)
    chunks: list[ModelChunk] | None = None
    error_code: str | None = None
    keep_alive: bool = True
    pending: bytes = b""
    answered: bool = False  # the whole answer went to the agent


async def _upstream_body(reader: asyncio.StreamReader, framing: BodyFraming) -> AsyncGenerator[bytes, None]:
    try:
        async for data in iter_body(reader, framing):
            yield data
    except (OSError, asyncio.IncompleteReadError, BatonError) as exc:
        message = exc.message if isinstance(exc, BatonError) else str(exc) or type(exc).__name__
        raise UpstreamError("upstream_failed", f"the endpoint's answer broke off: {message}") from exc


def _redacted_target(target: str) -> str:
    path, question, query = target.partition("?")
    if not question:
        return target
    params = [f"key={REDACTED}" if p.partition("=")[0] == "key" else p for p in query.split("&")]
    return f"{path}?{'&'.join(params)}"


def _client_context(ca_bundle: Path | None) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(cafile=str(ca_bundle) if ca_bundle else None)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError("config_invalid", f"the CA bundle {ca_bundle} cannot be loaded: {exc}") from exc
    context.set_alpn_protocols(["http/1.1"])
    return context
