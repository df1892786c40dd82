"""What to export, and where: the standard OpenTelemetry environment, then ``baton.toml``.

Export is off unless an OTLP endpoint is configured: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the base
URL; each signal is posted under ``/v1/logs``, ``/v1/traces``, ``/v1/metrics``), a signal's own
``OTEL_EXPORTER_OTLP_{LOGS,TRACES,METRICS}_ENDPOINT`` (the full URL), or ``endpoint`` in the
``[otel]`` table of ``baton.toml``. ``OTEL_SDK_DISABLED=true`` turns everything off, whatever
else is set; ``OTEL_{LOGS,TRACES,METRICS}_EXPORTER=none`` turns one signal off. The
environment wins over the file (baton's precedence: flag > environment > ``baton.toml``).

```toml
[otel]
endpoint = "http://127.0.0.1:4318"        # OTEL_EXPORTER_OTLP_ENDPOINT
headers = { authorization = "Bearer …" }   # OTEL_EXPORTER_OTLP_HEADERS (redacted from logs)
service_name = "baton"                      # OTEL_SERVICE_NAME
resource_attributes = { "deployment.environment" = "ci" }   # OTEL_RESOURCE_ATTRIBUTES
timeout_seconds = 10                        # OTEL_EXPORTER_OTLP_TIMEOUT (milliseconds there)
metrics_interval_seconds = 60               # OTEL_METRIC_EXPORT_INTERVAL (milliseconds there)
disabled = false                            # OTEL_SDK_DISABLED
```
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import unquote

from baton.errors import UsageError

__all__ = ["SIGNALS", "Signal", "TelemetryConfig"]

Signal = Literal["logs", "traces", "metrics"]
SIGNALS: Final[tuple[Signal, ...]] = ("logs", "traces", "metrics")
DEFAULT_SERVICE_NAME: Final = "baton"


@dataclass(frozen=True)
class TelemetryConfig:
    """The resolved configuration; :meth:`load` builds it."""

    endpoints: Mapping[Signal, str] = field(default_factory=dict)  # the full URL per enabled signal
    headers: Mapping[str, str] = field(default_factory=dict)
    service_name: str = DEFAULT_SERVICE_NAME
    resource_attributes: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: float = 10.0  # one export request, retries included
    metrics_interval_seconds: float = 60.0
    disabled: bool = False  # OTEL_SDK_DISABLED: nothing at all, /metrics included

    @property
    def exporting(self) -> bool:
        """Whether anything is sent to a collector."""
        return not self.disabled and bool(self.endpoints)

    def endpoint(self, signal: Signal) -> str | None:
        return None if self.disabled else self.endpoints.get(signal)

    @classmethod
    def load(cls, environ: Mapping[str, str], home: Path | None = None) -> TelemetryConfig:
        table = _toml_table(home / "baton.toml") if home is not None else {}
        disabled = _flag(environ.get("OTEL_SDK_DISABLED"), "OTEL_SDK_DISABLED")
        if disabled is None:
            disabled = _toml_bool(table, "disabled")
        base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or _toml_str(table, "endpoint")
        endpoints: dict[Signal, str] = {}
        for signal in SIGNALS:
            if environ.get(f"OTEL_{signal.upper()}_EXPORTER", "").strip().lower() == "none":
                continue
            own = environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
            url = own or (f"{base.rstrip('/')}/v1/{signal}" if base else None)
            if url:
                endpoints[signal] = _checked_url(url, signal)
        headers = {k.lower(): v for k, v in _toml_map(table, "headers").items()}
        headers.update(_env_pairs(environ.get("OTEL_EXPORTER_OTLP_HEADERS", ""), "OTEL_EXPORTER_OTLP_HEADERS"))
        attributes = dict(_toml_map(table, "resource_attributes"))
        attributes.update(_env_pairs(environ.get("OTEL_RESOURCE_ATTRIBUTES", ""), "OTEL_RESOURCE_ATTRIBUTES"))
        service = environ.get("OTEL_SERVICE_NAME") or attributes.pop("service.name", None)
        service = service or _toml_str(table, "service_name") or DEFAULT_SERVICE_NAME
        attributes.pop("service.name", None)
        timeout = _millis(environ, "OTEL_EXPORTER_OTLP_TIMEOUT") or _toml_float(table, "timeout_seconds") or 10.0
        interval = (
            _millis(environ, "OTEL_METRIC_EXPORT_INTERVAL") or _toml_float(table, "metrics_interval_seconds") or 60.0
        )
        return cls(
            endpoints=endpoints,
            headers=headers,
            service_name=service,
            resource_attributes=attributes,
            timeout_seconds=timeout,
            metrics_interval_seconds=interval,
            disabled=bool(disabled),
        )


def _checked_url(url: str, signal: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise UsageError("config_invalid", f"the OTLP {signal} endpoint must be an http(s) URL, not {url!r}")
    return url


def _flag(raw: str | None, name: str) -> bool | None:
    if raw is None or raw.strip() == "":
        return None
    value = raw.strip().lower()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise UsageError("config_invalid", f"{name} must be true or false, not {raw!r}")


def _env_pairs(raw: str, name: str) -> dict[str, str]:
    """``key1=value1,key2=value2`` with URL-encoded values (the OTEL list format)."""
    pairs: dict[str, str] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError("config_invalid", f"{name}: {item.strip()!r} is not key=value")
        pairs[unquote(key.strip()).lower() if name.endswith("HEADERS") else unquote(key.strip())] = unquote(
            value.strip()
        )
    return pairs


def _millis(environ: Mapping[str, str], name: str) -> float | None:
    raw = environ.get(name)
    if not raw:
        return None
    try:
        value = float(raw) / 1000
    except ValueError as exc:
        raise UsageError("config_invalid", f"{name} is a number of milliseconds, not {raw!r}") from exc
    if value <= 0:
        raise UsageError("config_invalid", f"{name} must be positive")
    return value


def _toml_table(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError("config_invalid", f"cannot read {path}: {exc}") from exc
    table = data.get("otel", {})
    if not isinstance(table, dict):
        raise UsageError("config_invalid", f"{path}: otel is a table ([otel])")
    return table


def _toml_str(table: Mapping[str, Any], key: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise UsageError("config_invalid", f"baton.toml: otel.{key} is a string")
    return value


def _toml_bool(table: Mapping[str, Any], key: str) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise UsageError("config_invalid", f"baton.toml: otel.{key} is true or false")
    return value


def _toml_float(table: Mapping[str, Any], key: str) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise UsageError("config_invalid", f"baton.toml: otel.{key} is a positive number")
    return float(value)


def _toml_map(table: Mapping[str, Any], key: str) -> dict[str, str]:
    value = table.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise UsageError("config_invalid", f"baton.toml: otel.{key} is a table of strings")
    return {str(k): v for k, v in value.items()}
