"""The fleet's metrics, all named ``baton_*``, counted from the runs' committed log entries.

One ``MeterProvider`` per process; its readers are an OTLP exporter (when a metrics endpoint
is configured) and a Prometheus registry (``GET /metrics`` on ``baton serve``, ``baton worker
--metrics-port``). Labels are few and bounded (agent, status, kind, decision): never a run id.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource

from baton.events.entry import LogEntry
from baton.observability.health import ExportHealth

__all__ = ["METRIC_NAMES", "RunMetrics"]

# OpenTelemetry names; Prometheus adds ``_total`` to counters and ``_seconds`` to histograms in s.
METRIC_NAMES = (
    "baton_runs_started",
    "baton_runs_finished",
    "baton_runs_failed",
    "baton_runs_cancelled",
    "baton_runs_running",
    "baton_run_duration",
    "baton_gate_wait",
    "baton_gates_pending",
    "baton_tool_calls",
    "baton_tokens",
    "baton_cost_usd",
    "baton_log_entries",
    "baton_otel_lost",
    "baton_queue_depth",
    "baton_dispatch_latency",
)
_TOKEN_KEYS = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_input_tokens": "cache_creation",
}


# Seconds from queued to executing on a worker: tens of milliseconds to minutes (no free slot).
_DISPATCH_BUCKETS = [0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 5, 10, 30, 60, 300]
# Seconds: a run takes seconds to hours, a gate waits seconds to a day.
_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600]


def _seconds(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


class RunMetrics:
    """Counts what the committed entries say; :meth:`observe` is called on the event loop."""

    def __init__(self, resource: Resource, readers: Iterable[MetricReader], health: ExportHealth) -> None:
        self.provider = MeterProvider(resource=resource, metric_readers=list(readers), shutdown_on_exit=False)
        meter = self.provider.get_meter("baton")
        self._started = meter.create_counter("baton_runs_started", description="Runs started, by agent")
        self._finished = meter.create_counter("baton_runs_finished", description="Runs that finished, by agent")
        self._failed = meter.create_counter("baton_runs_failed", description="Runs that failed, by agent and code")
        self._cancelled = meter.create_counter("baton_runs_cancelled", description="Runs cancelled, by agent")
        self._running = meter.create_up_down_counter(
            "baton_runs_running", description="Runs executing in this process now, by agent"
        )
        self._duration = meter.create_histogram(
            "baton_run_duration",
            unit="s",
            description="Duration of ended runs, by agent and status",
            explicit_bucket_boundaries_advisory=_BUCKETS,
        )
        self._gate_wait = meter.create_histogram(
            "baton_gate_wait",
            unit="s",
            description="How long gates waited for a decision, by kind and decision",
            explicit_bucket_boundaries_advisory=_BUCKETS,
        )
        self._gates_pending = meter.create_up_down_counter(
            "baton_gates_pending", description="Gates waiting for a human, by kind"
        )
        self._tool_calls = meter.create_counter(
            "baton_tool_calls", description="Tool calls the policy or a human decided, by kind and decision"
        )
        self._tokens = meter.create_counter("baton_tokens", description="Model tokens, by agent and type")
        self._cost = meter.create_counter("baton_cost_usd", description="Model cost the agents reported (USD)")
        self._entries = meter.create_counter("baton_log_entries", description="Log entries committed")
        meter.create_observable_counter(
            "baton_otel_lost",
            callbacks=[self._lost(health)],
            description="Telemetry items the collector did not get, by signal",
        )
        self._dispatch = meter.create_histogram(
            "baton_dispatch_latency",
            unit="s",
            description="Fleet runs dequeued here: from queued to their execution prepared on this worker",
            explicit_bucket_boundaries_advisory=_DISPATCH_BUCKETS,
        )
        self._queue_depth: int | None = None  # None: this process does not watch the queue
        meter.create_observable_gauge(
            "baton_queue_depth",
            callbacks=[self._depth],
            description="Fleet runs queued and not yet taken by a worker (as this worker last saw)",
        )
        self._agents: dict[str, str] = {}  # run id -> agent
        self._executing: dict[str, str] = {}  # run id -> agent, of the runs counted as running
        self._costs: dict[str, float] = {}  # run id -> the agent's running total
        self._gates: dict[str, tuple[str, float]] = {}  # gate id -> kind, opened (s)
        self._tool_kinds: dict[tuple[str, Any], str] = {}  # (run, request id) -> kind

    @staticmethod
    def _lost(health: ExportHealth) -> Any:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(n, {"signal": signal}) for signal, n in health.lost_items.items()]

        return observe

    def _depth(self, options: CallbackOptions) -> Iterable[Observation]:
        return [] if self._queue_depth is None else [Observation(self._queue_depth)]

    def queue_depth(self, depth: int) -> None:
        """The fleet runs queued now (a worker's takeover scan counts them every second)."""
        self._queue_depth = depth

    def dispatched(self, queued_at: str) -> None:
        """A fleet run queued at ``queued_at`` (its ``created_at``) is ready to execute here, now."""
        self._dispatch.record(max(time.time() - _seconds(queued_at), 0.0))

    def begin_run(self, run_id: str, agent: str) -> None:
        self._agents[run_id] = agent

    def observe(self, count: int, entries: list[LogEntry]) -> None:
        """``count`` entries committed; ``entries``: those of them that are not message chunks."""
        self._entries.add(count)
        for entry in entries:
            method = entry["method"]
            if method is None:
                continue
            if method.startswith("_baton/"):
                self._note(entry, method)
            elif method == "session/request_permission":
                self._permission(entry)

    def end_run(self, run_id: str) -> None:
        """The execution is over (its trace ended: an ending status, or the process stops)."""
        self._not_running(run_id)
        self._agents.pop(run_id, None)
        self._costs.pop(run_id, None)

    def _note(self, entry: LogEntry, method: str) -> None:
        params: dict[str, Any] = entry["payload"].get("params") or {}
        run_id = entry["run_id"]
        agent = self._agents.get(run_id, "unknown")
        if method == "_baton/run_started":
            agent = str(params.get("agent") or agent)
            self._agents[run_id] = agent
            self._started.add(1, {"agent": agent})
        elif method == "_baton/status":
            if params.get("status") == "running":
                if run_id not in self._executing:
                    self._executing[run_id] = agent
                    self._running.add(1, {"agent": agent})
            else:  # paused (parked), finished, failed, cancelled
                self._not_running(run_id)
            self._status(params, agent)
        elif method == "_baton/turn_complete":
            self._usage(run_id, agent, params)
        elif method == "_baton/gate_opened":
            kind = str(params.get("kind") or "tool")
            self._gates[str(params.get("gate_id"))] = (kind, _seconds(entry["ts"]))
            self._gates_pending.add(1, {"kind": kind})
        elif method == "_baton/gate_resolved":
            opened = self._gates.pop(str(params.get("gate_id")), None)
            if opened is not None:
                kind, at = opened
                self._gates_pending.add(-1, {"kind": kind})
                decision = str(params.get("decision") or "unknown")
                self._gate_wait.record(max(_seconds(entry["ts"]) - at, 0.0), {"kind": kind, "decision": decision})

    def _not_running(self, run_id: str) -> None:
        agent = self._executing.pop(run_id, None)
        if agent is not None:
            self._running.add(-1, {"agent": agent})

    def _status(self, params: dict[str, Any], agent: str) -> None:
        status = params.get("status")
        if status not in ("finished", "failed", "cancelled"):
            return
        labels = {"agent": agent}
        if status == "finished":
            self._finished.add(1, labels)
        elif status == "failed":
            self._failed.add(1, {**labels, "code": str(params.get("code") or "unknown")})
        else:
            self._cancelled.add(1, labels)
        duration = params.get("duration_ms")
        if isinstance(duration, int | float) and not isinstance(duration, bool):
            self._duration.record(duration / 1000, {**labels, "status": str(status)})

    def _usage(self, run_id: str, agent: str, params: dict[str, Any]) -> None:
        usage = params.get("usage")
        if isinstance(usage, dict):
            for key, kind in _TOKEN_KEYS.items():
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    self._tokens.add(value, {"agent": agent, "type": kind})
        total = params.get("total_cost_usd")
        if isinstance(total, int | float) and not isinstance(total, bool):
            # Agents report the session's running total: what this turn added is the difference.
            spent = float(total) - self._costs.get(run_id, 0.0)
            self._costs[run_id] = float(total)
            if spent > 0:
                self._cost.add(spent, {"agent": agent})

    def _permission(self, entry: LogEntry) -> None:
        payload = entry["payload"]
        key = (entry["run_id"], payload.get("id"))
        if entry["direction"] == "from_agent":
            params = payload.get("params") or {}
            baton = (params.get("_meta") or {}).get("baton") or {}
            tool = params.get("toolCall") or {}
            self._tool_kinds[key] = str(baton.get("kind") or tool.get("kind") or "other")
            return
        kind = self._tool_kinds.pop(key, "other")
        result = payload.get("result") or {}
        decision = ((result.get("_meta") or {}).get("baton") or {}).get("decision")
        if decision is None:
            outcome = result.get("outcome") or {}
            decision = "cancelled" if outcome.get("outcome") == "cancelled" else "answered"
        self._tool_calls.add(1, {"kind": kind, "decision": str(decision)})
