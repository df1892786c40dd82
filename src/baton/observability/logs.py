"""Every committed, redacted log entry of a run executed here, as an OpenTelemetry log record.

One record per entry: ``body`` is the entry as ``baton logs --json`` prints it (JSON text of
``{run_id, seq, ts, direction, method, payload}``), attributes ``seq``, ``direction`` and
``event_type`` (the method; absent for a response to an unknown request); the
time is the entry's ``ts``. The resource is the process's (``service.name``, the configured
attributes) plus ``run_id``, ``task_id``, ``agent`` and ``owner``: a ``LoggerProvider`` per run,
all of them feeding one batching processor (a batch every 500 ms or 512 records). The records
are built on a thread of baton's (:class:`RecordPump`), off the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk.resources import Resource

from baton.events.entry import LogEntry
from baton.observability.health import ExportHealth
from baton.observability.traces import RunTrace, ts_nanos
from baton.store.redact import encode_json

__all__ = ["RecordPump", "RunLogRecords"]

_log = logging.getLogger("baton.observability")


class RecordPump:
    """Builds the SDK's log records on a thread of its own: the event loop only hands the
    committed entries over (a deque append). At most ``limit`` entries wait; past that a group
    is dropped, and counted as not exported."""

    def __init__(self, health: ExportHealth, limit: int = 20_000) -> None:
        self._health = health
        self._limit = limit
        self._waiting = 0
        self._groups: deque[tuple[RunLogRecords, list[LogEntry], Context | None, int]] = deque()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name="baton-otel-records", daemon=True)
        self._thread.start()

    def put(self, records: RunLogRecords, entries: list[LogEntry], context: Context | None) -> None:
        self._health.emitted("logs", len(entries))
        if self._waiting + len(entries) > self._limit:
            return  # counted as emitted, never exported: the summary says so
        self._waiting += len(entries)
        self._idle.clear()
        self._groups.append((records, entries, context, time.time_ns()))
        self._wake.set()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every group handed over is built (and queued for export)."""
        return self._idle.wait(timeout)

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    def _work(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            while self._groups:
                records, entries, context, observed = self._groups.popleft()
                try:
                    records.build(entries, context, observed)
                except Exception:  # never the run's problem; the entries count as lost
                    _log.exception("building OpenTelemetry log records failed")
                self._waiting -= len(entries)
            self._idle.set()
            if self._stopping:
                return


class RunLogRecords:
    """The log records of one run."""

    def __init__(
        self, resource: Resource, processor: LogRecordProcessor, trace: RunTrace | None, pump: RecordPump
    ) -> None:
        self._pump = pump
        self._provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        self._provider.add_log_record_processor(processor)
        self._logger = self._provider.get_logger("baton.session_log")
        self._trace = trace

    def emit(self, entries: list[LogEntry]) -> None:
        """Hand committed entries over (on the event loop): the records are built on the pump."""
        context = self._trace.current_context() if self._trace is not None and not self._trace.ended else None
        self._pump.put(self, entries, context)

    def build(self, entries: list[LogEntry], context: Context | None, observed: int) -> None:
        emit = self._logger.emit
        for entry in entries:
            attributes: dict[str, str | int] = {"seq": entry["seq"], "direction": entry["direction"]}
            if entry["method"] is not None:
                attributes["event_type"] = entry["method"]
            emit(
                timestamp=ts_nanos(entry["ts"]),
                observed_timestamp=observed,
                context=context,
                severity_number=SeverityNumber.INFO,
                severity_text="INFO",
                body=encode_json(entry),
                attributes=attributes,
            )
