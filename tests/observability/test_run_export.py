"""Scripted runs of the real Claude Code exported over OTLP/HTTP to a receiver on loopback.

The receiver decodes each body with opentelemetry-proto's classes; nothing of the SDK is faked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.observability._receiver import OtlpReceiver, attributes_of, otlp_receiver

from baton.agents.processes import run_process_ids
from baton.config import Settings
from baton.events.entry import LogEntry
from baton.gates.ledger import GateLedger
from baton.runs import Baton, RunSpec
from baton.testing import ScriptedModelServer

pytestmark = [pytest.mark.claude, pytest.mark.timeout(90)]

MODEL_KEY = "sk-scripted-otel-key-0123456789abcdef"
HEADER_CANARY = "otel-header-canary-" + "5f0c2e9a41b7"
OTEL_VARIABLES = [name for name in os.environ if name.startswith("OTEL_")]


@pytest.fixture(autouse=True)
def clean_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name)


@contextmanager
def scripted(settings: Settings, scenario: str) -> Iterator[Settings]:
    with ScriptedModelServer(scenario) as server:
        yield replace(settings, anthropic_base_url=server.base_url, anthropic_api_key=MODEL_KEY)


def exporting_to(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"x-collector-token={HEADER_CANARY}")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "baton-under-test")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "200")


def run_environments(run_id: str) -> list[dict[str, str]]:
    """The environment of each live process of the run (Claude Code, its launcher)."""
    found = []
    for pid in run_process_ids(run_id):
        with contextlib.suppress(OSError):
            pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            found.append(dict(pair.decode(errors="replace").split("=", 1) for pair in pairs if b"=" in pair))
    return found


async def approved_run(
    settings: Settings, repo: Path, prompt: str, environments: list[dict[str, str]] | None = None
) -> tuple[str, list[LogEntry], str]:
    """needs-approval: the Bash call opens a gate, decided here; (run id, log, gate id). While the
    gate waits, the environments of the run's processes go into ``environments``."""
    async with Baton(settings) as baton:
        handle = await baton.start(RunSpec(prompt=prompt, repo=repo, owner="alice"))
        ledger = GateLedger(baton.store)
        async with asyncio.timeout(30):
            while True:
                pending = [g for g in await ledger.list(run_id=handle.run_id) if g.status == "pending"]
                if pending:
                    break
                await asyncio.sleep(0.02)
        gate = pending[0]
        if environments is not None:
            environments.extend(run_environments(handle.run_id))
        binding = {"bound_call_id": gate.bound_call_id, "bound_input_hash": gate.bound_input_hash}
        await ledger.decide(gate.id, {**binding, "decision": "approve"}, decided_by="tester")
        outcome = await handle.wait()
        assert outcome.status == "finished", outcome
        entries = await baton.log.read(handle.run_id)
    return handle.run_id, entries, gate.id


def by_name(spans: list[Any], name: str) -> list[Any]:
    return [span for span in spans if span.name == name]


async def test_a_run_arrives_as_log_records_and_a_trace(
    settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with otlp_receiver() as receiver, scripted(settings, "needs-approval") as configured:
        exporting_to(monkeypatch, receiver.endpoint)
        environments: list[dict[str, str]] = []
        run_id, entries, gate_id = await approved_run(
            configured, repo, f"go (token {HEADER_CANARY}, key {MODEL_KEY})", environments
        )
        # Baton flushed before it closed: everything is there already.
        received = receiver.received
        with receiver.lock:
            records = received.log_records()
            spans = [span for _resource, span in received.spans()]
            span_resources = [resource for resource, _span in received.spans()]
            raw = b"".join(received.raw)
            headers = list(received.headers)

    # Logs: every committed entry, in order, with its attributes and the run's resource.
    mine = [(resource, record) for resource, record in records if resource.get("run_id") == run_id]
    assert [attributes_of(record.attributes)["seq"] for _r, record in mine] == [e["seq"] for e in entries]
    resource = mine[0][0]
    assert resource["service.name"] == "baton-under-test"
    assert resource["deployment.environment"] == "test"
    assert resource["agent"] == "claude" and resource["owner"] == "alice" and resource["run_id"] == run_id
    for (_resource, record), entry in zip(mine, entries, strict=True):
        attributes = attributes_of(record.attributes)
        assert attributes["direction"] == entry["direction"]
        assert attributes.get("event_type") == entry["method"]
        assert json.loads(record.body.string_value) == entry
    # Redaction: the model key and the exporter's own header never reach the collector's log
    # records (the header itself is sent, as it must be).
    assert MODEL_KEY.encode() not in raw and HEADER_CANARY.encode() not in raw
    assert all(h.get("x-collector-token") == HEADER_CANARY for h in headers)

    # Traces: run -> turn -> tool -> gate, parent links right and timings nested.
    [run] = [span for span in by_name(spans, "baton.run") if attributes_of(span.attributes)["run_id"] == run_id]
    turns = [s for s in by_name(spans, "baton.turn") if s.parent_span_id == run.span_id]
    assert len(turns) == 1
    [turn] = turns
    [tool] = [s for s in by_name(spans, "baton.tool") if s.parent_span_id == turn.span_id]
    [gate] = [s for s in by_name(spans, "baton.gate") if s.parent_span_id == tool.span_id]
    assert {s.trace_id for s in (run, turn, tool, gate)} == {run.trace_id}
    assert run.start_time_unix_nano <= turn.start_time_unix_nano <= tool.start_time_unix_nano
    assert tool.start_time_unix_nano <= gate.start_time_unix_nano <= gate.end_time_unix_nano
    assert gate.end_time_unix_nano <= tool.end_time_unix_nano <= turn.end_time_unix_nano <= run.end_time_unix_nano
    gate_attributes = attributes_of(gate.attributes)
    assert gate_attributes["baton.gate.id"] == gate_id
    assert gate_attributes["baton.gate.decision"] == "approve"
    assert gate_attributes["baton.gate.decided_by"] == "tester"
    tool_attributes = attributes_of(tool.attributes)
    assert tool_attributes["baton.tool.name"] == "Bash" and tool_attributes["baton.decision"] == "allow"
    assert attributes_of(run.attributes)["baton.status"] == "finished"
    turn_attributes = attributes_of(turn.attributes)
    assert turn_attributes["gen_ai.usage.output_tokens"] > 0 and "baton.total_cost_usd" in turn_attributes
    for span in (run, turn, tool, gate):
        assert attributes_of(span.attributes)["run_id"] == run_id
    assert all(r.get("run_id") == run_id for r in span_resources if r.get("agent") == "claude")
    snapshots = [s for s in by_name(spans, "baton.snapshot") if s.parent_span_id == turn.span_id]
    assert snapshots, "the turn's snapshot is a child of the turn"
    # The agent reached its model through the sandbox's model proxy: each request is a span of the turn.
    requests = [s for s in by_name(spans, "baton.model_request") if s.parent_span_id == turn.span_id]
    assert len(requests) >= 2, [s.name for s in spans]
    streamed = [attributes_of(s.attributes) for s in requests]
    assert all(a["baton.model.outcome"] == "completed" and a["http.response.status_code"] == 200 for a in streamed)
    assert any(a.get("gen_ai.usage.output_tokens", 0) > 0 for a in streamed)

    # The trace id is in the run's log, and the requests baton sent carried the trace context.
    [note] = [e["payload"]["params"] for e in entries if e["method"] == "_baton/trace"]
    assert note == {"trace_id": run.trace_id.hex(), "span_id": run.span_id.hex()}
    [prompt] = [e for e in entries if e["method"] == "session/prompt" and e["direction"] == "to_agent"]
    traceparent = prompt["payload"]["params"]["_meta"]["traceparent"]
    assert traceparent.startswith(f"00-{run.trace_id.hex()}-{turn.span_id.hex()}-")
    # Claude Code's process has the run's trace context in its environment (TRACEPARENT, the
    # OpenTelemetry environment carrier), naming the run's span: it started before the turn.
    claude = [env for env in environments if env.get("TRACEPARENT")]
    assert claude, [sorted(env) for env in environments]
    assert {env["TRACEPARENT"].rsplit("-", 1)[0] for env in claude} == {f"00-{run.trace_id.hex()}-{run.span_id.hex()}"}


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_collector_that_is_down_costs_the_export_only_and_is_reported_once(
    settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    exporting_to(monkeypatch, f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
    caplog.set_level(logging.WARNING, logger="baton.observability")
    with scripted(settings, "needs-approval") as configured:
        loop = asyncio.get_running_loop()
        started = loop.time()
        _run_id, entries, _gate = await approved_run(configured, repo, "go")
        took = loop.time() - started
    assert entries[-1]["method"] == "_baton/status"
    assert entries[-1]["payload"]["params"]["status"] == "finished"
    reports = [r for r in caplog.records if r.name == "baton.observability" and "export to" in r.getMessage()]
    assert len(reports) <= 1, [r.getMessage() for r in caplog.records]
    summaries = [r.getMessage() for r in caplog.records if "did not get" in r.getMessage()]
    assert len(summaries) == 1 and "logs" in summaries[0]
    assert all("127.0.0.1" in message for message in [*(r.getMessage() for r in reports), *summaries])
    # (caplog also listens on the SDK's loggers, which baton stops short of the root logger:
    # tests/observability/test_cli_export.py checks that a process's stderr has nothing of them.)
    assert took < 60


async def test_otel_sdk_disabled_sends_nothing(settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with otlp_receiver() as receiver, scripted(settings, "needs-approval") as configured:
        exporting_to(monkeypatch, receiver.endpoint)
        monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
        async with Baton(configured) as baton:
            assert baton.telemetry is None
        environments: list[dict[str, str]] = []
        _run_id, entries, _gate = await approved_run(configured, repo, "go", environments)
        assert not [e for e in entries if e["method"] == "_baton/trace"]
        assert environments and not [env for env in environments if "TRACEPARENT" in env]
        prompt = next(e for e in entries if e["method"] == "session/prompt" and e["direction"] == "to_agent")
        assert "traceparent" not in (prompt["payload"]["params"].get("_meta") or {})
    assert receiver.received.raw == []


def test_the_receiver_parses_what_it_gets() -> None:
    """A body that is not an OTLP protobuf message is refused, not counted."""
    import urllib.error
    import urllib.request

    with otlp_receiver() as receiver:
        request = urllib.request.Request(
            receiver.endpoint + "/v1/logs",
            data=b"\xff\xff\xff not protobuf",
            headers={"Content-Type": "application/x-protobuf"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 400
        refused.value.close()
        assert isinstance(receiver, OtlpReceiver) and receiver.received.logs == []
        assert receiver.received.bad
