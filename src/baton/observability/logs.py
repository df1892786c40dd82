"""Every committed, redacted log entry of a run executed here, as an OpenTelemetry log record.

One record per entry: ``body`` is the entry as ``baton logs --json`` prints it (JSON text of
``{run_id, seq, ts, direction, method, payload}``), attributes ``seq``, ``direction``,
``event_type`` (the method; absent for a response to an unknown request) and ``run_id``; the
time is the entry's ``ts``. The resource is the process's (``service.name``, the configured
attributes) plus ``run_id``, ``task_id``, ``agent`` and ``owner``: a ``LoggerProvider`` per run,
all of them feeding one batching processor (a batch every 500 ms or 512 records).
"""

from __future__ import annotations

import time

from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk.resources import Resource

from baton.events.entry import LogEntry
from baton.observability.health import ExportHealth
from baton.observability.traces import RunTrace, ts_nanos
from baton.store.redact import encode_json

__all__ = ["RunLogRecords"]


class RunLogRecords:
    """The log records of one run."""

    def __init__(
        self, resource: Resource, processor: LogRecordProcessor, trace: RunTrace | None, health: ExportHealth
    ) -> None:
        self._health = health
        self._provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        self._provider.add_log_record_processor(processor)
        self._logger = self._provider.get_logger("baton.session_log")
        self._trace = trace

    def emit(self, entries: list[LogEntry]) -> None:
        observed = time.time_ns()
        context = self._trace.current_context() if self._trace is not None and not self._trace.ended else None
        emit = self._logger.emit
        self._health.emitted("logs", len(entries))
        for entry in entries:
            attributes: dict[str, str | int] = {
                "run_id": entry["run_id"],
                "seq": entry["seq"],
                "direction": entry["direction"],
            }
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
