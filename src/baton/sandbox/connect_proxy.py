"""The allow-list proxy: a sandboxed agent's only way to the hosts it was allowed.

An HTTP forward proxy (the agent's ``HTTPS_PROXY``/``HTTP_PROXY``) on a Unix socket and/or
a loopback TCP port. It takes ``CONNECT host:port`` (a tunnel, for HTTPS and anything else
over TCP) and absolute-form ``GET http://host[:port]/path`` (plain HTTP, one request per
connection), and lets through only targets on the :class:`AllowList`.

Every connection is reported once, before anything is forwarded, as a :class:`NetDecision`
``{host, port, allowed, reason}`` (the run logs it as ``_baton/net``). A refused target is
answered 403 ``net_not_allowed`` with the reason; a request that is not a proxy request 400
``request_invalid``; an allowed host that cannot be reached 502 ``upstream_unreachable``.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from baton.errors import BatonError, RefusedError, UpstreamError, UsageError
from baton.sandbox.proxy_allow import AllowList, NetDecision, parse_host_port
from baton.sandbox.proxy_http import (
    Headers,
    RequestHead,
    error_answer,
    header,
    parse_request,
    parse_response,
    read_head,
    serialize_head,
    without_hop_by_hop,
)
from baton.sandbox.proxy_listener import ProxyListener

__all__ = ["ConnectProxy", "NetReporter"]

NetReporter = Callable[[NetDecision], None]

_log = logging.getLogger("baton.sandbox")
_BUFFER = 1 << 18  # a tunnel's reads, and what each side may hold before the other is paused
_STATUS = {"request_invalid": 400, "headers_too_large": 431}


class ConnectProxy(ProxyListener):
    """``async with ConnectProxy(AllowList.parse(["pypi.org"]), report=log, tcp=("127.0.0.1", 0)) as proxy:``"""

    def __init__(
        self,
        allow: AllowList,
        *,
        report: NetReporter | None = None,
        unix_path: Path | None = None,
        tcp: tuple[str, int] | None = None,
        sock: socket.socket | None = None,
        connect_timeout: float = 10.0,
    ) -> None:
        super().__init__(unix_path=unix_path, tcp=tcp, sock=sock, limit=_BUFFER)
        self.allow = allow
        self._report = report
        self._connect_timeout = connect_timeout

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            raw = await read_head(reader)
            if raw is None:
                return
            head = parse_request(raw)
            host, port = _target(head)
        except BatonError as error:
            self._tell(NetDecision(None, None, False, error.message))
            writer.write(error_answer(_STATUS.get(error.code, 400), error))
            await writer.drain()
            return
        decision = self.allow.decide(host, port)
        self._tell(decision)
        if not decision.allowed:
            writer.write(error_answer(403, RefusedError("net_not_allowed", decision.reason)))
            await writer.drain()
            return
        try:
            upstream_reader, upstream_writer = await self._connect(host, port)
        except UpstreamError as error:
            writer.write(error_answer(502, error))
            await writer.drain()
            return
        try:
            if head.method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                await _relay(reader, writer, upstream_reader, upstream_writer)
            else:
                upstream_writer.write(_origin_request(head, host, port))
                await _relay(reader, writer, upstream_reader, upstream_writer, response_head=True)
        finally:
            upstream_writer.transport.abort()

    def _tell(self, decision: NetDecision) -> None:
        if self._report is None:
            return
        try:
            self._report(decision)
        except Exception:
            _log.exception("the network proxy's reporter failed")

    async def _connect(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            async with asyncio.timeout(self._connect_timeout):
                return await asyncio.open_connection(host, port, limit=_BUFFER)
        except TimeoutError as exc:
            message = f"{host}:{port} accepted no connection within {self._connect_timeout} s"
            raise UpstreamError("upstream_unreachable", message) from exc
        except OSError as exc:
            raise UpstreamError("upstream_unreachable", f"{host}:{port}: {exc.strerror or exc}") from exc


def _target(head: RequestHead) -> tuple[str, int]:
    try:
        return _parse_target(head)
    except UsageError as exc:
        raise UsageError("request_invalid", exc.message) from exc


def _parse_target(head: RequestHead) -> tuple[str, int]:
    if head.method == "CONNECT":
        host, port = parse_host_port(head.target, default_port=None)
        if port is None:
            raise UsageError("request_invalid", f"CONNECT names host:port, not {head.target[:80]!r}")
        return host, port
    parts = urlsplit(head.target)
    if parts.scheme == "https":
        raise UsageError("request_invalid", "an https:// URL goes through CONNECT, not as a plain request")
    if parts.scheme != "http" or not parts.netloc or parts.username or parts.password:
        message = "a proxy request is CONNECT host:port or an absolute http:// URL (this is a proxy, not a server)"
        raise UsageError("request_invalid", message)
    host, port = parse_host_port(parts.netloc, default_port=80)
    assert port is not None
    return host, port


def _origin_request(head: RequestHead, host: str, port: int) -> bytes:
    """The head for the origin server: origin-form target, its ``Host``, one request per connection."""
    parts = urlsplit(head.target)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    authority = header(head.headers, "host") or (host if port == 80 else f"{host}:{port}")
    headers = [(k, v) for k, v in _framing_kept(head.headers) if k.lower() != "host"]
    return serialize_head(
        f"{head.method} {target} {head.version}", [("Host", authority), *headers, ("Connection", "close")]
    )


def _framing_kept(headers: Headers) -> Headers:
    """The hop-by-hop headers dropped but ``Transfer-Encoding``: the body after the head is copied as is."""
    kept = without_hop_by_hop(headers)
    return [*kept, *((k, v) for k, v in headers if k.lower() == "transfer-encoding")]


async def _relay(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
    *,
    response_head: bool = False,
) -> None:
    """Copy both ways until both sides are done (an EOF is passed on as a half-close) or one breaks."""
    pipes = [
        asyncio.create_task(_pipe(reader, upstream_writer)),
        asyncio.create_task(_pipe(upstream_reader, writer, response_head=response_head)),
    ]
    try:
        for finished in asyncio.as_completed(pipes):
            await finished
    except (ConnectionError, asyncio.IncompleteReadError, BatonError):
        pass  # a side went away or spoke nonsense: the connection is over
    finally:
        for pipe in pipes:
            pipe.cancel()
        await asyncio.gather(*pipes, return_exceptions=True)


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter, *, response_head: bool = False) -> None:
    if response_head:  # tell the client this connection ends with the response
        raw = await read_head(source)
        if raw is None:
            return
        response = parse_response(raw)
        headers = [*_framing_kept(response.headers), ("Connection", "close")]
        sink.write(serialize_head(f"{response.version} {response.status} {response.reason}", headers))
    while data := await source.read(_BUFFER):
        sink.write(data)
        await sink.drain()
    if sink.can_write_eof() and not sink.is_closing():
        sink.write_eof()
