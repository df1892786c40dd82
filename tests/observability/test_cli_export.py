"""``baton run`` and ``baton worker`` as processes: export on exit, a collector that is down,
``--metrics-port``."""

from __future__ import annotations

import json
import re
import signal
import socket
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.cli._baton_cli import BatonCLI
from tests.observability._receiver import attributes_of, otlp_receiver

from baton.testing import ScriptedModelServer

pytestmark = [pytest.mark.claude, pytest.mark.timeout(120)]

MODEL_KEY = "sk-scripted-otel-cli-key-0123456789abcdef"


def cli(tmp_path: Path, model: ScriptedModelServer, **otel: str) -> BatonCLI:
    baton = BatonCLI(tmp_path / "baton-home")
    for name in [name for name in baton.env if name.startswith("OTEL_")]:
        del baton.env[name]
    baton.env.update(otel, ANTHROPIC_BASE_URL=model.base_url, ANTHROPIC_API_KEY=MODEL_KEY)
    return baton


def test_baton_run_exports_its_run_before_it_exits(tmp_path: Path, repo: Path) -> None:
    with otlp_receiver() as receiver, ScriptedModelServer("plain") as model:
        baton = cli(tmp_path, model, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
        done = baton("run", "hello", "--repo", str(repo), "--json")
        assert done.returncode == 0, done.describe()
        with receiver.lock:
            records = receiver.received.log_records()
            spans = [span.name for _resource, span in receiver.received.spans()]
            run_traces = {span.trace_id.hex() for _r, span in receiver.received.spans() if span.name == "baton.run"}
        run_id = done.json_lines()[-1]["run_id"]
        shown = baton("show", run_id, "--json")
        printed = baton("show", run_id)
    assert shown.returncode == 0, shown.describe()
    assert run_traces == {json.loads(shown.stdout)["trace_id"]}  # baton show names the run's trace
    [trace_id] = run_traces
    assert re.search(rf"^trace_id: +{trace_id}$", printed.stdout, re.MULTILINE), printed.stdout
    assert records, done.describe()
    methods = [attributes_of(record.attributes).get("event_type") for _resource, record in records]
    assert methods[0] == "_baton/run_started" and methods[-1] == "_baton/status"
    assert {"baton.run", "baton.turn"} <= set(spans)
    assert MODEL_KEY.encode() not in b"".join(receiver.received.raw)


def test_baton_run_with_the_collector_down_ends_as_usual_and_says_so_once(tmp_path: Path, repo: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with ScriptedModelServer("plain") as model:
        baton = cli(tmp_path, model, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
        started = time.monotonic()
        done = baton("run", "hello", "--repo", str(repo), "--json")
        took = time.monotonic() - started
    assert done.returncode == 0, done.describe()
    assert done.json_lines()[-1]["type"] == "task.finished"
    assert done.stderr.count(f"OpenTelemetry export to http://127.0.0.1:{port}") <= 1, done.stderr
    assert done.stderr.count(f"the collector at http://127.0.0.1:{port}") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert took < 60


def test_log_format_json_writes_the_export_report_as_json_lines(tmp_path: Path, repo: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with ScriptedModelServer("plain") as model:
        baton = cli(tmp_path, model, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
        done = baton("--log-format", "json", "run", "hello", "--repo", str(repo), "--json")
    assert done.returncode == 0, done.describe()
    logged = [json.loads(line) for line in done.stderr.splitlines()]  # every line is one JSON object
    assert {r["logger"] for r in logged} == {"baton.observability"}, done.stderr
    # The failure is reported once (during the run, or only in the summary when the run was over first).
    assert len([r for r in logged if "export to" in r["message"]]) <= 1
    [summary] = [r for r in logged if "did not get" in r["message"]]
    assert f"127.0.0.1:{port}" in summary["message"] and summary["level"] == "warning"


def test_baton_worker_serves_metrics_on_its_port(tmp_path: Path) -> None:
    baton = BatonCLI(tmp_path / "baton-home")
    started = baton.start("worker", "--interval", "0.2", "--metrics-port", "0")
    _args, process = started
    try:
        assert process.stderr is not None
        url = None
        for line in process.stderr:
            found = re.search(r"metrics on (http://127\.0\.0\.1:\d+/metrics)", line)
            if found:
                url = found.group(1)
                break
        assert url is not None, "baton worker did not say where its metrics are"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        names = {family.name for family in text_string_to_metric_families(text)}
        assert "baton_otel_lost" in names
        process.send_signal(signal.SIGTERM)
        stopped = baton.finish(started, timeout=30)
        assert stopped.returncode == 0, stopped.describe()
    finally:
        baton.stop([started])
