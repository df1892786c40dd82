"""The log entry: one ACP message (either direction) or one baton notification."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, Protocol, TypedDict

__all__ = ["Direction", "EntrySink", "LogEntry", "utc_timestamp"]

# Seen from the host: what it sent to the agent, what the agent sent, and baton's own
# run-level notifications (``_baton/*``) and observations (stderr, malformed lines).
Direction = Literal["to_agent", "from_agent", "baton"]


class LogEntry(TypedDict):
    run_id: str
    seq: int
    ts: str
    direction: Direction
    method: str | None
    payload: dict[str, Any]


def utc_timestamp(moment: datetime | None = None) -> str:
    """RFC 3339 UTC with milliseconds, e.g. ``2026-11-30T12:00:00.123Z``."""
    moment = moment or datetime.now(UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class EntrySink(Protocol):
    def append(self, run_id: str, direction: Direction, method: str | None, payload: dict[str, Any]) -> int: ...

    async def drain(self) -> None:
        """Wait while too many entries are waiting for the disk (backpressure)."""
        ...
