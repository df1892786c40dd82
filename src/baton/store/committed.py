"""A group of committed log entries as the session log's writer committed them: what its commit
observer (the OpenTelemetry export, :mod:`baton.observability`) is handed.

Nothing is built per entry for the observer: on the event loop it looks at the few entries it
needs as dicts (:meth:`CommittedEntries.without_message_chunks`: an agent's message chunks are
the bulk of a log and say nothing to a trace or a metric), and the log export reads the stored
columns of every entry later, on a thread of its own (:meth:`CommittedEntries.rows`). Nothing
in a group changes once it is committed, so it can be read from any thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from baton.events.entry import Direction, LogEntry

if TYPE_CHECKING:
    from baton.store._writer import Queued

__all__ = ["CommittedEntries", "Row"]

# (run_key, seq, ts, direction, method, payload JSON text, chunk text): one log_entries row.
Row = tuple[int, int, str, Direction, str | None, str, str | None]


class CommittedEntries:
    """Entries committed together: every run's in seq order; ``run_ids`` maps each run's
    ``run_key`` (the first column of its rows) to its id, in order of first appearance."""

    __slots__ = ("_queued", "run_ids")

    def __init__(self, queued: list[Queued], run_ids: dict[int, str]) -> None:
        self._queued = queued
        self.run_ids = run_ids

    def __len__(self) -> int:
        return len(self._queued)

    def __iter__(self) -> Iterator[LogEntry]:
        for row, run, payload in self._queued:
            yield _entry(run.run_id, row, payload)

    def without_message_chunks(self) -> list[LogEntry]:
        """Every entry but the agent's message chunks (those with a ``chunk_text``)."""
        return [_entry(run.run_id, row, payload) for row, run, payload in self._queued if row[6] is None]

    def rows(self, run_key: int | None = None) -> list[Row]:
        """The stored columns of every entry (of one run): ``(run_key, seq, ts, direction,
        method, payload JSON text, chunk text)``; the text is the redacted payload as committed."""
        if run_key is None or len(self.run_ids) == 1:
            return [queued[0] for queued in self._queued]
        return [queued[0] for queued in self._queued if queued[0][0] == run_key]


def _entry(run_id: str, row: Row, payload: dict[str, object]) -> LogEntry:
    return {
        "run_id": run_id,
        "seq": row[1],
        "ts": row[2],
        "direction": row[3],
        "method": row[4],
        "payload": payload,
    }
