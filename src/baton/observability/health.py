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
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics.export import MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from baton.observability.config import Signal

__all__ = ["CountedMetricExporter", "CountedSpanExporter", "ExportHealth"]

_log = logging.getLogger("baton.observability")


class ExportHealth:
    """Batches and items each signal failed to export; thread-safe (exporters run on threads)."""

    def __init__(self, endpoints: Mapping[Signal, str] | None = None) -> None:
        self._lock = threading.Lock()
        self._configured = dict(endpoints or {})
        self.failed_batches: dict[Signal, int] = {"logs": 0, "traces": 0, "metrics": 0}
        self.lost_items: dict[Signal, int] = {"logs": 0, "traces": 0, "metrics": 0}
        self.emitted_items: dict[Signal, int] = {"logs": 0, "traces": 0, "metrics": 0}
        self.exported_items: dict[Signal, int] = {"logs": 0, "traces": 0, "metrics": 0}
        self.reports = 0
        self._summarized = False  # after the summary, failures of the last flush say nothing more
        self._endpoints: dict[str, None] = {}
        self._reasons = _silence_the_sdk()

    def emitted(self, signal: Signal, items: int) -> None:
        self.emitted_items[signal] += items  # on the event loop only

    def exported(self, signal: Signal, items: int) -> None:
        with self._lock:
            self.exported_items[signal] += items

    def failed(self, signal: Signal, items: int, endpoint: str) -> None:
        with self._lock:
            self.failed_batches[signal] += 1
            self.lost_items[signal] += items
            self._endpoints.setdefault(endpoint, None)
            first = self.reports == 0 and not self._summarized
            if first:
                self.reports = 1
        if first:
            _log.warning(
                "OpenTelemetry export to %s failed (%s); what the collector misses is dropped and counted, runs go on",
                endpoint,
                self._reasons.last or "no answer",
            )

    def summary(self) -> str | None:
        """One line on what was lost (after shutdown: records still queued count too), or None.
        Failures after it (the last flush giving up) are not reported again."""
        with self._lock:
            self._summarized = True
            lost = dict(self.lost_items)
            # Log records are counted as they are handed to the SDK: what never reached the
            # collector, dropped from a full queue or still queued at the end, is the difference.
            lost["logs"] = max(lost["logs"], self.emitted_items["logs"] - self.exported_items["logs"])
            batches = sum(self.failed_batches.values())
        if not batches and not any(lost.values()):
            return None
        missed = [signal for signal, n in lost.items() if n]
        parts = ", ".join(f"{lost[signal]} {signal}" for signal in missed)
        urls = list(dict.fromkeys(self._configured[s] for s in missed if s in self._configured)) or list(
            self._endpoints
        )
        given_up = f"; {batches} batches given up" if batches else ""
        where = f" at {', '.join(urls)}" if urls else ""
        return f"OpenTelemetry: the collector{where} did not get {parts}{given_up}"

    def close(self) -> None:
        """Nothing to release: the SDK's loggers stay quiet (a last export may still be aborting)."""


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


_REASONS: _Reasons | None = None


def _silence_the_sdk() -> _Reasons:
    """The SDK's ``opentelemetry`` loggers stop at one handler that keeps the last reason."""
    global _REASONS
    if _REASONS is None:
        _REASONS = _Reasons()
        sdk = logging.getLogger("opentelemetry")
        sdk.addHandler(_REASONS)
        sdk.propagate = False
    return _REASONS


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
