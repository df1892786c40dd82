"""Observability on the OpenTelemetry SDK: runs as log records and traces, the fleet's metrics.

See docs/observability.md. Off unless configured (:class:`TelemetryConfig`); the pieces are
:class:`Telemetry` (the process's), :class:`RunTelemetry` (one run's execution). The SDK is
imported on first use of those: a process with nothing configured never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.lazy import lazy_exports
from baton.observability.config import TelemetryConfig

if TYPE_CHECKING:
    from baton.observability.telemetry import RunTelemetry, Telemetry, telemetry_for

__all__ = ["RunTelemetry", "Telemetry", "TelemetryConfig", "telemetry_for"]

__getattr__ = lazy_exports(
    __name__, dict.fromkeys(("RunTelemetry", "Telemetry", "telemetry_for"), "baton.observability.telemetry")
)
