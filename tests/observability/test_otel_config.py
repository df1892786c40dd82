"""What the standard OTEL environment and baton.toml's [otel] table configure."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.errors import UsageError
from baton.observability import Telemetry, TelemetryConfig

pytestmark = pytest.mark.timeout(10)


def test_nothing_configured_is_off_and_builds_nothing(tmp_path: Path) -> None:
    config = TelemetryConfig.load({}, tmp_path)
    assert not config.exporting and config.endpoints == {}
    assert Telemetry.start(config) is None


def test_the_base_endpoint_names_each_signal_and_a_signal_can_be_turned_off() -> None:
    config = TelemetryConfig.load(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://tempo:4318/v1/traces",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20abc,x-team=infra",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=ci,service.name=ignored-here",
            "OTEL_SERVICE_NAME": "baton-ci",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
        }
    )
    assert dict(config.endpoints) == {
        "logs": "http://127.0.0.1:4318/v1/logs",
        "traces": "http://tempo:4318/v1/traces",
    }
    assert dict(config.headers) == {"authorization": "Bearer abc", "x-team": "infra"}
    assert config.service_name == "baton-ci"
    assert dict(config.resource_attributes) == {"deployment.environment": "ci"}
    assert config.timeout_seconds == 2.5


def test_baton_toml_configures_and_the_environment_wins(tmp_path: Path) -> None:
    (tmp_path / "baton.toml").write_text(
        '[otel]\nendpoint = "http://collector:4318"\nservice_name = "from-toml"\n'
        'headers = { authorization = "Bearer toml-token-1234" }\ntimeout_seconds = 3\n'
    )
    from_file = TelemetryConfig.load({}, tmp_path)
    assert from_file.endpoint("logs") == "http://collector:4318/v1/logs"
    assert from_file.service_name == "from-toml" and from_file.timeout_seconds == 3
    assert from_file.headers["authorization"] == "Bearer toml-token-1234"
    both = TelemetryConfig.load(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_SERVICE_NAME": "env"}, tmp_path
    )
    assert both.endpoint("traces") == "http://env:4318/v1/traces" and both.service_name == "env"


def test_otel_sdk_disabled_wins_over_everything(tmp_path: Path) -> None:
    (tmp_path / "baton.toml").write_text('[otel]\nendpoint = "http://collector:4318"\n')
    config = TelemetryConfig.load({"OTEL_SDK_DISABLED": "true"}, tmp_path)
    assert config.disabled and not config.exporting and config.endpoint("logs") is None
    assert Telemetry.start(config, prometheus=True) is None
    (tmp_path / "baton.toml").write_text('[otel]\nendpoint = "http://collector:4318"\ndisabled = true\n')
    assert TelemetryConfig.load({}, tmp_path).disabled
    assert not TelemetryConfig.load({"OTEL_SDK_DISABLED": "false"}, tmp_path).disabled


@pytest.mark.parametrize(
    ("environ", "toml"),
    [
        ({"OTEL_SDK_DISABLED": "maybe"}, ""),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, ""),
        ({"OTEL_EXPORTER_OTLP_HEADERS": "no-equals-sign"}, ""),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, ""),
        ({}, "[otel]\ntimeout_seconds = -1\n"),
        ({}, 'otel = "on"\n'),
    ],
)
def test_a_bad_setting_is_config_invalid(tmp_path: Path, environ: dict[str, str], toml: str) -> None:
    (tmp_path / "baton.toml").write_text(toml)
    with pytest.raises(UsageError) as refused:
        TelemetryConfig.load(environ, tmp_path)
    assert refused.value.code == "config_invalid"
