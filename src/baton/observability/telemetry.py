"""The process's telemetry: built once by whoever executes runs, fed by the session log's commits.

``Telemetry.start(config, prometheus=…)`` returns None when there is nothing to do (no endpoint
configured and no ``/metrics`` to serve, or ``OTEL_SDK_DISABLED=true``): the session log then has
no commit hook and the hot path costs nothing. Otherwise :meth:`Telemetry.committed` is the
hook (``SessionLog.observe_commits``), called on the event loop with each group of committed
entries; :meth:`begin_run` gives the executor a :class:`RunTelemetry` (the ``traceparent`` for
ACP requests, the ``_baton/trace`` note, the model proxy's observer). :meth:`shutdown` flushes,
waiting at most ``timeout`` seconds whatever the collector does.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final
from wsgiref.simple_server import WSGIServer

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client import CollectorRegistry, generate_latest, start_http_server

from baton.events.entry import LogEntry
from baton.observability.config import TelemetryConfig
from baton.observability.health import CountedMetricExporter, CountedSpanExporter, ExportHealth
from baton.observability.logs import LogExport, OtlpLogPoster, RunLogRecords
from baton.observability.metrics import RunMetrics
from baton.observability.model import ModelRequestSpans
from baton.observability.traces import RunTrace
from baton.store.committed import CommittedEntries, Row

__all__ = ["RunTelemetry", "Telemetry"]

_KEEP_ENDED: Final = 64  # ended runs kept for entries committed after their last status
_SPAN_BATCH_MS: Final = 500


class RunTelemetry:
    """What one run's execution has of the process's telemetry."""

    def __init__(self, run_id: str, trace: RunTrace | None, records: RunLogRecords | None) -> None:
        self.run_id = run_id
        self.trace = trace
        self.records = records

    def stamp(self, message: dict[str, Any]) -> None:
        """``traceparent`` into ``_meta`` of a request baton sends the agent (the tap calls it)."""
        if self.trace is not None:
            self.trace.stamp(message)

    def trace_note(self) -> dict[str, str] | None:
        """The ``_baton/trace`` params: where this execution's trace is."""
        if self.trace is None:
            return None
        return {"trace_id": self.trace.trace_id, "span_id": self.trace.span_id}

    def model_observer(self) -> ModelRequestSpans | None:
        """The model proxy's observer for this run (``baton.model_request`` spans)."""
        return ModelRequestSpans(self.trace) if self.trace is not None else None

    def environment(self) -> dict[str, str]:
        """``TRACEPARENT`` for the agent's environment (the OpenTelemetry environment carrier)."""
        if self.trace is None:
            return {}
        carrier: dict[str, str] = {}
        self.trace.stamp_carrier(carrier)
        return {key.upper(): value for key, value in carrier.items()}

    def committed(self, rows: list[Row], entries: list[LogEntry]) -> None:
        """The run's committed ``rows``; ``entries``: those of them a trace can see (not the
        agent's message chunks)."""
        if self.records is not None:
            self.records.emit(rows)
        if self.trace is not None:
            observe = self.trace.observe
            for entry in entries:
                observe(entry)


class Telemetry:
    """Logs, traces and metrics of the runs this process executes."""

    def __init__(self, config: TelemetryConfig, *, prometheus: bool) -> None:
        self.config = config
        self.health = ExportHealth(config.endpoints if not config.disabled else None)
        attributes: dict[str, Any] = {**config.resource_attributes, "service.name": config.service_name}
        self.resource = Resource.create(attributes)
        options: dict[str, Any] = {"headers": dict(config.headers), "timeout": config.timeout_seconds}
        self._logs: LogExport | None = None
        self._span_processor: BatchSpanProcessor | None = None
        if (url := config.endpoint("logs")) is not None:
            self._logs = LogExport(OtlpLogPoster(self.health, url, **options), self.health)
        if (url := config.endpoint("traces")) is not None:
            self._span_processor = BatchSpanProcessor(
                CountedSpanExporter(self.health, url, **options), schedule_delay_millis=_SPAN_BATCH_MS
            )
        readers: list[MetricReader] = []
        if (url := config.endpoint("metrics")) is not None:
            readers.append(
                PeriodicExportingMetricReader(
                    CountedMetricExporter(self.health, url, **options),
                    export_interval_millis=config.metrics_interval_seconds * 1000,
                )
            )
        self.registry: CollectorRegistry | None = None
        if prometheus:
            self.registry = CollectorRegistry(auto_describe=True)
            readers.append(
                PrometheusMetricReader(registry=self.registry, disable_target_info=True, scope_info_enabled=False)
            )
        self.metrics = RunMetrics(self.resource, readers, self.health) if readers else None
        self._runs: OrderedDict[str, RunTelemetry] = OrderedDict()
        self._metrics_server: WSGIServer | None = None
        self._closed = False

    @classmethod
    def start(cls, config: TelemetryConfig, *, prometheus: bool = False) -> Telemetry | None:
        """The process's telemetry, or None when nothing is configured (zero cost then)."""
        if config.disabled or not (config.endpoints or prometheus):
            return None
        return cls(config, prometheus=prometheus)

    def begin_run(self, run_id: str, *, task_id: str | None, agent: str, owner: str | None) -> RunTelemetry:
        """A run's execution starts here: its trace begins now."""
        identity = {"run_id": run_id, "agent": agent}
        if task_id:
            identity["task_id"] = task_id
        resource_attributes = dict(identity)
        if owner:
            resource_attributes["owner"] = owner
        resource = self.resource.merge(Resource(resource_attributes))
        previous = self._runs.pop(run_id, None)
        if previous is not None and previous.trace is not None:
            previous.trace.end()
        trace = None
        if self._span_processor is not None:
            trace = RunTrace(resource, self._span_processor, identity, on_end=lambda: self._ended(run_id))
        records = None
        if self._logs is not None:
            records = RunLogRecords(run_id, resource.attributes, resource.schema_url, trace, self._logs)
        run = RunTelemetry(run_id, trace, records)
        self._runs[run_id] = run
        if self.metrics is not None:
            self.metrics.begin_run(run_id, agent)
        return run

    def run(self, run_id: str) -> RunTelemetry | None:
        return self._runs.get(run_id)

    def committed(self, committed: CommittedEntries) -> None:
        """The session log's commit hook: every committed entry of every run, each run's in seq
        order. Only the entries a trace or a metric can see are built as dicts; the log export
        takes the rows."""
        if self._closed:
            return
        tracing = self._span_processor is not None
        entries = committed.without_message_chunks() if tracing or self.metrics is not None else []
        if self.metrics is not None:
            self.metrics.observe(len(committed), entries)
        if self._logs is None and not tracing:
            return
        single = len(committed.run_ids) == 1
        for run_key, run_id in committed.run_ids.items():
            run = self._runs.get(run_id)
            if run is None:  # a run this process did not begin (an import, a test's own log)
                run = self.begin_run(run_id, task_id=None, agent="unknown", owner=None)
            mine = entries if single else [entry for entry in entries if entry["run_id"] == run_id]
            run.committed(committed.rows(run_key) if self._logs is not None else [], mine)

    def _ended(self, run_id: str) -> None:
        if self.metrics is not None:
            self.metrics.end_run(run_id)
        ended = [key for key, run in self._runs.items() if run.trace is not None and run.trace.ended]
        for key in ended[: max(len(ended) - _KEEP_ENDED, 0)]:
            self._runs.pop(key, None)

    def flush(self) -> None:
        """Export what is queued now (blocking; a collector that is down makes it wait)."""
        if self._logs is not None:
            self._logs.flush()
        if self._span_processor is not None:
            self._span_processor.force_flush()

    def serve_metrics(self, port: int, host: str = "127.0.0.1") -> int:
        """``GET /metrics`` on ``host:port`` (``baton worker --metrics-port``); the bound port."""
        if self.registry is None:
            raise RuntimeError("this telemetry keeps no Prometheus registry (metrics=True)")
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._metrics_server = server
        return int(server.server_port)

    def metrics_text(self) -> bytes:
        """The Prometheus text exposition of the metrics (``GET /metrics``)."""
        if self.registry is None:
            return b""
        return generate_latest(self.registry)

    def shutdown(self, timeout: float = 1.0) -> str | None:
        """Flush and stop, within ``timeout`` seconds; the summary of what was lost, if anything."""
        if self._closed:
            return None
        self._closed = True
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
        for run in self._runs.values():
            if run.trace is not None:
                run.trace.end()
        millis = int(timeout * 1000)
        deadline = time.monotonic() + timeout
        stops: list[Any] = []
        if self._logs is not None:
            logs = self._logs
            stops.append(lambda: logs.shutdown(timeout))
        if self._span_processor is not None:
            stops.append(self._span_processor.shutdown)
        if self.metrics is not None:
            provider = self.metrics.provider
            stops.append(lambda: provider.shutdown(timeout_millis=millis))
        # The SDK's processors wait up to 30 s for an export in flight: each stops on a thread of
        # its own, and the process waits for them at most ``timeout`` in all.
        workers = [threading.Thread(target=stop, name="baton-otel-shutdown", daemon=True) for stop in stops]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(max(deadline - time.monotonic(), 0.0))
        summary = self.health.summary()
        self.health.close()
        return summary


def telemetry_for(environ: Mapping[str, str], home: Any, *, prometheus: bool = False) -> Telemetry | None:
    """The telemetry the standard environment and ``baton.toml`` under ``home`` configure."""
    return Telemetry.start(TelemetryConfig.load(environ, home), prometheus=prometheus)
