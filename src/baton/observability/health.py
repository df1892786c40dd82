"""A collector that is down costs batches, never a run: what was lost is counted, and said once.

The SDK's exporters retry within their timeout and then give a batch up; the exporters here are
the SDK's own with one change, that a batch given up is counted on :class:`ExportHealth`. The
first failure in a process is reported once on the ``baton.observability`` logger (a warning
naming the endpoint and the reason); the SDK's own log lines about it are kept off baton's
output (its ``opentelemetry`` loggers stop at :class:`_Reasons`, which remembers the last one
as the reason). What was lost is in ``baton_otel_export_failures`` and in the summary
:meth:`ExportHealth.summary` gives at shutdown.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from baton.observability.config import Signal

__all__ = ["CountedLogExporter", "CountedMetricExporter", "CountedSpanExporter", "ExportHealth"]

_log = logging.getLogger("baton.observability")


class ExportHealth:
    """Batches and items each signal failed to export; thread-safe (exporters run on threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.failed_batches: dict[Signal, int] = {"logs": 0, "traces": 0, "metrics": 0}
        self.lost_items: dict[Signal, int] = {"logs": 0, "traces": 0, "metrics": 0}
        self.emitted_items: dict[Signal, int] = {"logs": 0, "traces": 0, "metrics": 0}
        self.exported_items: dict[Signal, int] = {"logs": 0, "traces": 0, "metrics": 0}
        self.reports = 0
        self._reasons = _Reasons()
        sdk = logging.getLogger("opentelemetry")
        sdk.addHandler(self._reasons)
        sdk.propagate = False

    def emitted(self, signal: Signal, items: int) -> None:
        self.emitted_items[signal] += items  # on the event loop only

    def exported(self, signal: Signal, items: int) -> None:
        with self._lock:
            self.exported_items[signal] += items

    def failed(self, signal: Signal, items: int, endpoint: str) -> None:
        with self._lock:
            self.failed_batches[signal] += 1
            self.lost_items[signal] += items
            first = self.reports == 0
            if first:
                self.reports = 1
        if first:
            _log.warning(
                "OpenTelemetry export to %s failed (%s); what the collector misses is dropped and counted, runs go on",
                endpoint,
                self._reasons.last or "no answer",
            )

    def summary(self) -> str | None:
        """One line on what was lost (after shutdown: records still queued count too), or None."""
        with self._lock:
            lost = dict(self.lost_items)
            # Log records are counted as they are handed to the SDK: what never reached the
            # collector, dropped from a full queue or still queued at the end, is the difference.
            lost["logs"] = max(lost["logs"], self.emitted_items["logs"] - self.exported_items["logs"])
            batches = sum(self.failed_batches.values())
        if not batches and not any(lost.values()):
            return None
        parts = ", ".join(f"{n} {signal}" for signal, n in lost.items() if n)
        return f"OpenTelemetry: the collector did not get {parts} ({batches} batches given up)"

    def close(self) -> None:
        sdk = logging.getLogger("opentelemetry")
        sdk.removeHandler(self._reasons)
        if not sdk.handlers:
            sdk.propagate = True


class _Reasons(logging.Handler):
    """Keeps the SDK's last warning or error as the reason of a failure; prints nothing."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.last = record.getMessage()[:300]
        except Exception:  # a broken format string in a library's message: nothing to keep
            self.last = record.msg if isinstance(record.msg, str) else None


class CountedLogExporter(OTLPLogExporter):
    def __init__(self, health: ExportHealth, endpoint: str, **options: Any) -> None:
        super().__init__(endpoint=endpoint, **options)
        self._health, self._url = health, endpoint

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        result = super().export(batch)
        if result is LogRecordExportResult.SUCCESS:
            self._health.exported("logs", len(batch))
        else:
            self._health.failed("logs", len(batch), self._url)
        return result


class CountedSpanExporter(OTLPSpanExporter):
    def __init__(self, health: ExportHealth, endpoint: str, **options: Any) -> None:
        super().__init__(endpoint=endpoint, **options)
        self._health, self._url = health, endpoint

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        if result is not SpanExportResult.SUCCESS:
            self._health.failed("traces", len(spans), self._url)
        return result


class CountedMetricExporter(OTLPMetricExporter):
    def __init__(self, health: ExportHealth, endpoint: str, **options: Any) -> None:
        super().__init__(endpoint=endpoint, **options)
        self._health, self._url = health, endpoint

    def export(
        self, metrics_data: MetricsData, timeout_millis: float | None = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        result = super().export(metrics_data, timeout_millis, **kwargs)
        if result is not MetricExportResult.SUCCESS:
            points = sum(
                len(metric.data.data_points)
                for resource in metrics_data.resource_metrics
                for scope in resource.scope_metrics
                for metric in scope.metrics
            )
            self._health.failed("metrics", points, self._url)
        return result
