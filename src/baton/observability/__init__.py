"""Observability on the OpenTelemetry SDK: runs as log records and traces, the fleet's metrics.

See docs/observability.md. Off unless configured (:class:`TelemetryConfig`); the pieces are
:class:`Telemetry` (the process's), :class:`RunTelemetry` (one run's execution).
"""

from __future__ import annotations

from baton.observability.config import TelemetryConfig
from baton.observability.telemetry import RunTelemetry, Telemetry, telemetry_for

__all__ = ["RunTelemetry", "Telemetry", "TelemetryConfig", "telemetry_for"]
