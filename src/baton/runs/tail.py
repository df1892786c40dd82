"""Following a run's committed log from any process (``baton logs --follow``).

The store is polled: entries after the cursor are read, and the tail ends after the run's
final ``_baton/status`` — or, without one, once the run's row says it has ended (the executor
commits its last entry before it updates the row) or its executor is gone (``interrupted``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Final

from baton.events.entry import LogEntry
from baton.runs.executors import effective_status
from baton.store import SessionLog, Store

__all__ = ["POLL_SECONDS", "follow_entries", "is_final_status"]

POLL_SECONDS: Final = 0.1


def is_final_status(entry: LogEntry) -> bool:
    """The ``_baton/status`` entry that ends a run."""
    if entry["method"] != "_baton/status" or entry["direction"] != "baton":
        return False
    params = entry["payload"].get("params") or {}
    return params.get("status") in ("finished", "failed", "cancelled")


async def follow_entries(
    store: Store, log: SessionLog, run_id: str, after: int = 0, *, poll_seconds: float = POLL_SECONDS
) -> AsyncGenerator[LogEntry, None]:
    """Committed entries with ``seq > after``, as they are committed, until the run has ended."""
    cursor = after
    while True:
        record = await store.get_run(run_id)  # read first: entries read after it are all there is
        ended = record.is_terminal or (
            effective_status(record.status, record.executor_id, record.heartbeat_at) == "interrupted"
        )
        entries = await log.read(run_id, after=cursor)
        for entry in entries:
            yield entry
            cursor = entry["seq"]
            if is_final_status(entry):
                return
        if ended:
            return
        if not entries:
            await asyncio.sleep(poll_seconds)
