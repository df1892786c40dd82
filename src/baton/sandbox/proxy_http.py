"""The HTTP/1.1 that baton's proxies speak: heads, bodies, framing and error answers.

Just enough of RFC 9112 for a proxy: a head is read whole (``headers_too_large`` past the
reader's limit), a request is refused as ``request_invalid`` when its framing is ambiguous
(both ``Content-Length`` and ``Transfer-Encoding``, a coding other than ``chunked``, folded or
nameless header lines), and bodies are streamed chunk by chunk, never buffered whole unless a
caller asks (:func:`read_request_body`, with a size limit).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal

from baton.errors import BatonError, RefusedError, UsageError

__all__ = [
    "HOP_BY_HOP",
    "BodyFraming",
    "Headers",
    "RequestHead",
    "ResponseHead",
    "body_framing",
    "encode_chunk",
    "error_answer",
    "header",
    "iter_body",
    "parse_request",
    "parse_response",
    "read_head",
    "read_request_body",
    "serialize_head",
    "without_hop_by_hop",
]

Headers = list[tuple[str, str]]  # in order, names as sent

# Headers that describe one connection, never forwarded (RFC 9110 §7.6.1).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_END = b"\r\n\r\n"


@dataclass(frozen=True)
class RequestHead:
    method: str
    target: str  # as sent: origin-form, absolute-form or (CONNECT) authority-form
    version: str
    headers: Headers

    @property
    def keep_alive(self) -> bool:
        tokens = _tokens(self.headers, "connection")
        return "close" not in tokens if self.version == "HTTP/1.1" else "keep-alive" in tokens


@dataclass(frozen=True)
class ResponseHead:
    version: str
    status: int
    reason: str
    headers: Headers

    @property
    def keep_alive(self) -> bool:
        tokens = _tokens(self.headers, "connection")
        return "close" not in tokens if self.version == "HTTP/1.1" else "keep-alive" in tokens


@dataclass(frozen=True)
class BodyFraming:
    kind: Literal["none", "length", "chunked", "close"]  # close: the body ends when the connection does
    length: int = 0


def header(headers: Headers, name: str) -> str | None:
    """The first value of ``name`` (any case), or None."""
    name = name.lower()
    return next((value for key, value in headers if key.lower() == name), None)


def _tokens(headers: Headers, name: str) -> set[str]:
    name = name.lower()
    return {token.strip().lower() for key, value in headers if key.lower() == name for token in value.split(",")} - {""}


def without_hop_by_hop(headers: Headers) -> Headers:
    """The end-to-end headers: hop-by-hop ones and those ``Connection`` names are dropped."""
    dropped = HOP_BY_HOP | _tokens(headers, "connection")
    return [(key, value) for key, value in headers if key.lower() not in dropped]


async def read_head(reader: asyncio.StreamReader, prefix: bytes = b"") -> bytes | None:
    """One head up to its blank line; None when the peer closed before sending a byte."""
    try:
        return prefix + await reader.readuntil(_END)
    except asyncio.IncompleteReadError as exc:
        if not prefix and not exc.partial.strip():
            return None
        raise UsageError("request_invalid", "the connection closed in the middle of a head") from exc
    except asyncio.LimitOverrunError as exc:
        raise RefusedError("headers_too_large", "the head is larger than this proxy reads") from exc


def _parse_lines(raw: bytes) -> tuple[str, Headers]:
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes every byte
        raise UsageError("request_invalid", "the head is not text") from exc
    start, *lines = text.removesuffix("\r\n\r\n").split("\r\n")
    headers: Headers = []
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or not name or not set(name) <= _TOKEN:
            raise UsageError("request_invalid", f"a malformed header line: {line[:80]!r}")
        headers.append((name, value.strip(" \t")))
    return start, headers


def parse_request(raw: bytes) -> RequestHead:
    start, headers = _parse_lines(raw)
    parts = start.split(" ")
    if len(parts) != 3 or not parts[0] or not set(parts[0]) <= _TOKEN or not parts[1]:
        raise UsageError("request_invalid", f"a malformed request line: {start[:80]!r}")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise UsageError("request_invalid", f"unsupported HTTP version {version[:20]!r}")
    return RequestHead(method, target, version, headers)


def parse_response(raw: bytes) -> ResponseHead:
    start, headers = _parse_lines(raw)
    version, _, rest = start.partition(" ")
    status, _, reason = rest.partition(" ")
    if version not in ("HTTP/1.1", "HTTP/1.0") or len(status) != 3 or not status.isdigit():
        raise UsageError("request_invalid", f"a malformed status line: {start[:80]!r}")
    return ResponseHead(version, int(status), reason, headers)


def body_framing(headers: Headers, *, response_to: str | None = None, status: int = 200) -> BodyFraming:
    """How the body after ``headers`` ends (``response_to``: the request's method, for a response)."""
    if response_to is not None and (response_to == "HEAD" or status in (204, 304) or 100 <= status < 200):
        return BodyFraming("none")
    codings = _tokens(headers, "transfer-encoding")
    lengths = {value.strip() for key, value in headers if key.lower() == "content-length"}
    if codings:
        if lengths or codings != {"chunked"}:
            message = "an ambiguous body: a Transfer-Encoding other than chunked, or with a Content-Length"
            raise UsageError("request_invalid", message)
        return BodyFraming("chunked")
    if len(lengths) > 1 or (lengths and not next(iter(lengths)).isdigit()):
        raise UsageError("request_invalid", "an invalid Content-Length")
    if lengths:
        length = int(next(iter(lengths)))
        return BodyFraming("length", length) if length else BodyFraming("none")
    return BodyFraming("close") if response_to is not None else BodyFraming("none")


async def iter_body(reader: asyncio.StreamReader, framing: BodyFraming, *, size: int = 1 << 16) -> AsyncIterator[bytes]:
    """The body's pieces as they arrive: each chunk of a chunked body, else reads of ≤ ``size``."""
    try:
        if framing.kind == "length":
            left = framing.length
            while left:
                data = await reader.read(min(left, size))
                if not data:
                    raise asyncio.IncompleteReadError(b"", left)
                left -= len(data)
                yield data
        elif framing.kind == "chunked":
            while True:
                line = await reader.readuntil(b"\r\n")
                digits = line.split(b";", 1)[0].strip()
                if not digits or digits.strip(b"0123456789abcdefABCDEF"):
                    raise UsageError("request_invalid", f"a malformed chunk size {line[:20]!r}")
                length = int(digits, 16)
                if length == 0:
                    while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, dropped
                        pass
                    return
                data = await reader.readexactly(length + 2)
                if data[-2:] != b"\r\n":
                    raise UsageError("request_invalid", "a chunk does not end with CRLF")
                yield data[:-2]
        elif framing.kind == "close":
            while data := await reader.read(size):
                yield data
    except asyncio.IncompleteReadError as exc:
        raise UsageError("request_invalid", "the connection closed in the middle of a body") from exc
    except asyncio.LimitOverrunError as exc:
        raise UsageError("request_invalid", "a chunk line is too long") from exc


async def read_request_body(reader: asyncio.StreamReader, head: RequestHead, *, limit: int) -> bytes:
    """A request's whole body, refused as ``body_too_large`` past ``limit`` bytes."""
    framing = body_framing(head.headers)
    if framing.kind == "length" and framing.length > limit:
        raise RefusedError("body_too_large", f"the body is {framing.length} bytes; the limit is {limit}")
    parts: list[bytes] = []
    total = 0
    async for data in iter_body(reader, framing):
        total += len(data)
        if total > limit:
            raise RefusedError("body_too_large", f"the body is larger than {limit} bytes")
        parts.append(data)
    return b"".join(parts)


def serialize_head(start_line: str, headers: Headers) -> bytes:
    lines = [start_line, *(f"{key}: {value}" for key, value in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def encode_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def error_answer(status: int, error: BatonError, *, reason: str = "") -> bytes:
    """A whole ``Connection: close`` answer whose JSON body reads as baton's, Anthropic's and OpenAI's error.

    ``{"type": "error", "error": {"type", "code", "message"}}``: baton's clients read
    ``error.code``; the agents' SDKs read ``error.type`` and ``error.message``.
    """
    kind = "api_error" if status >= 500 else "invalid_request_error"
    body = json.dumps({"type": "error", "error": {"type": kind, **error.to_dict()}}).encode()
    headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
        ("Connection", "close"),
        ("X-Baton-Error", error.code),
    ]
    return serialize_head(f"HTTP/1.1 {status} {reason or _REASONS.get(status, 'Error')}", headers) + body


_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
}
