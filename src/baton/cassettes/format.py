"""The cassette file: one JSON Lines file, versioned.

The first line is the header, every other line one request/response pair::

    {"baton_cassette": 1, "recorded_at": "2026-12-02T04:00:00Z", "agent": "claude",
     "endpoint": "http://127.0.0.1:8123",
     "paths": {"workspace": "/work/repo", "agent_home": "/root/.baton/runs/r1/agent-home"}}
    {"seq": 0, "at": 0.0, "method": "POST", "path": "/v1/messages?beta=true",
     "headers": {"anthropic-version": "2023-06-01", "x-api-key": "[redacted]", ...},
     "body": {...the request's JSON...}, "status": 200,
     "response_headers": {"content-type": "text/event-stream; charset=utf-8"},
     "chunks": [{"at": 0.004, "data": "event: message_start\\ndata: {...}\\n\\n"}, ...], "duration": 0.02}

``seq`` is the order in which the exchanges ended (the lines' order); ``at`` the seconds from the
recording's start to when the request arrived. A cassette's *position* order is by ``at``
(then ``seq``): concurrent side requests end in any order, but they started in one. A body that
is not JSON is kept as text in ``body_text``; a response piece that is not UTF-8 as base64 in
``data_b64``. Secrets never reach the file (baton.cassettes.recorder).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from baton.errors import UsageError

__all__ = [
    "CASSETTE_VERSION",
    "Cassette",
    "CassetteExchange",
    "CassettePaths",
    "exchange_record",
    "header_record",
    "load_cassette",
]

CASSETTE_VERSION = 1
_MAX_LINE = 256 << 20  # a line longer than this is not a cassette's


@dataclass(frozen=True)
class CassettePaths:
    """The recording run's paths, rewritten to the replaying run's in what is replayed."""

    workspace: str | None = None
    agent_home: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"workspace": self.workspace, "agent_home": self.agent_home}

    def pairs(self, other: CassettePaths) -> list[tuple[str, str]]:
        """(this path, the other's) for each path both know and that differ, longest first."""
        pairs = [
            (mine, theirs)
            for mine, theirs in ((self.workspace, other.workspace), (self.agent_home, other.agent_home))
            if mine and theirs and mine != theirs
        ]
        return sorted(pairs, key=lambda pair: -len(pair[0]))


@dataclass(frozen=True)
class CassetteExchange:
    position: int  # the index in start order (``at``, then ``seq``)
    seq: int
    at: float
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # the request's JSON; None when it had no body or the body is not JSON
    body_text: str | None
    status: int
    response_headers: dict[str, str]
    chunks: tuple[tuple[float, bytes], ...]  # (seconds since the request arrived, bytes)
    duration: float

    @property
    def response_body(self) -> bytes:
        return b"".join(data for _, data in self.chunks)


@dataclass(frozen=True)
class Cassette:
    path: Path
    version: int
    recorded_at: str | None
    agent: str | None
    endpoint: str | None
    paths: CassettePaths
    exchanges: tuple[CassetteExchange, ...] = field(default=())


def header_record(*, recorded_at: str, agent: str | None, endpoint: str | None, paths: CassettePaths) -> dict[str, Any]:
    return {
        "baton_cassette": CASSETTE_VERSION,
        "recorded_at": recorded_at,
        "agent": agent,
        "endpoint": endpoint,
        "paths": paths.to_dict(),
    }


def exchange_record(
    *,
    seq: int,
    at: float,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    status: int,
    response_headers: dict[str, str],
    chunks: list[tuple[float, bytes]],
    duration: float,
) -> dict[str, Any]:
    record: dict[str, Any] = {"seq": seq, "at": round(at, 6), "method": method, "path": path, "headers": headers}
    try:
        record["body"] = json.loads(body) if body else None
    except ValueError:
        record["body"], record["body_text"] = None, body.decode("utf-8", "replace")
    record["status"] = status
    record["response_headers"] = response_headers
    record["chunks"] = [_chunk(at, data) for at, data in chunks]
    record["duration"] = round(duration, 6)
    return record


def _chunk(at: float, data: bytes) -> dict[str, Any]:
    try:
        return {"at": round(at, 6), "data": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"at": round(at, 6), "data_b64": base64.b64encode(data).decode()}


def load_cassette(path: Path | str) -> Cassette:
    """Read a cassette; ``cassette_invalid`` naming the line for anything that is not one."""
    path = Path(path)
    try:
        with path.open("rb") as file:
            lines = [line for line in file if line.strip()]
    except OSError as exc:
        raise UsageError("cassette_invalid", f"cannot read the cassette {path}: {exc.strerror or exc}") from exc
    if not lines:
        raise UsageError("cassette_invalid", f"{path} is empty, not a cassette")
    header = _json_line(path, 1, lines[0])
    version = header.get("baton_cassette")
    if not isinstance(version, int):
        raise UsageError("cassette_invalid", f"{path}:1 is not a cassette header (no baton_cassette version)")
    if version != CASSETTE_VERSION:
        raise UsageError(
            "cassette_invalid", f"{path} is cassette version {version}; this baton reads version {CASSETTE_VERSION}"
        )
    given = header.get("paths")
    paths: dict[str, Any] = given if isinstance(given, dict) else {}
    records = [(_json_line(path, number, line), number) for number, line in enumerate(lines[1:], start=2)]
    exchanges = [_exchange(path, number, record) for record, number in records]
    exchanges.sort(key=lambda exchange: (exchange.at, exchange.seq))
    return Cassette(
        path=path,
        version=version,
        recorded_at=_str_or_none(header.get("recorded_at")),
        agent=_str_or_none(header.get("agent")),
        endpoint=_str_or_none(header.get("endpoint")),
        paths=CassettePaths(_str_or_none(paths.get("workspace")), _str_or_none(paths.get("agent_home"))),
        exchanges=tuple(_with_position(exchange, index) for index, exchange in enumerate(exchanges)),
    )


def _with_position(exchange: CassetteExchange, position: int) -> CassetteExchange:
    return replace(exchange, position=position)


def _json_line(path: Path, number: int, line: bytes) -> dict[str, Any]:
    if len(line) > _MAX_LINE:
        raise UsageError("cassette_invalid", f"{path}:{number} is longer than {_MAX_LINE} bytes")
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise UsageError("cassette_invalid", f"{path}:{number} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise UsageError("cassette_invalid", f"{path}:{number} is not a JSON object")
    return value


def _exchange(path: Path, number: int, record: dict[str, Any]) -> CassetteExchange:
    try:
        chunks = tuple(
            (
                float(chunk["at"]),
                base64.b64decode(chunk["data_b64"]) if "data_b64" in chunk else str(chunk["data"]).encode(),
            )
            for chunk in record.get("chunks") or ()
        )
        return CassetteExchange(
            position=0,
            seq=int(record["seq"]),
            at=float(record["at"]),
            method=str(record["method"]),
            path=str(record["path"]),
            headers={str(k): str(v) for k, v in (record.get("headers") or {}).items()},
            body=record.get("body"),
            body_text=_str_or_none(record.get("body_text")),
            status=int(record["status"]),
            response_headers={str(k): str(v) for k, v in (record.get("response_headers") or {}).items()},
            chunks=chunks,
            duration=float(record.get("duration") or 0.0),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError("cassette_invalid", f"{path}:{number} is not a cassette exchange ({exc!r})") from exc


def _str_or_none(value: object) -> str | None:
    return None if value is None else str(value)
