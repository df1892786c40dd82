"""The log records baton encodes itself (baton.observability.otlp_logs), posted by the SDK's
OTLP/HTTP exporter to a receiver on loopback that decodes them with opentelemetry-proto's classes."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.observability._receiver import attributes_of, otlp_receiver

from baton.observability import Telemetry, TelemetryConfig
from baton.observability.traces import ts_nanos
from baton.store import Redactor, SessionLog, Store

pytestmark = pytest.mark.timeout(60)

CANARY = "log-record-canary-" + "93e1c0d2b7a4"


@pytest.fixture(autouse=True)
def clean_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("OTEL_")]:
        monkeypatch.delenv(name)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await asyncio.to_thread(Store.open, f"sqlite:///{tmp_path / 'baton.db'}")
    async with opened:
        yield opened


def telemetry(endpoint: str, **environ: str) -> Telemetry:
    config = TelemetryConfig.load({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "records", **environ})
    started = Telemetry.start(config)
    assert started is not None
    return started


async def test_every_entry_of_two_runs_arrives_in_order_with_its_attributes_and_span(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK's exporter reads the standard environment: gzip bodies when asked.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "gzip")
    with otlp_receiver() as receiver:
        exported = telemetry(receiver.endpoint, OTEL_METRICS_EXPORTER="none")
        first = (await store.create_run(agent="a")).id
        second = (await store.create_run(agent="b")).id
        async with SessionLog(store, Redactor([CANARY])) as log:
            log.observe_commits(exported.committed)
            runs = {
                first: exported.begin_run(first, task_id="task-1", agent="a", owner="alice"),
                second: exported.begin_run(second, task_id=None, agent="b", owner=None),
            }
            for run_id in runs:
                log.open_run(run_id)
            methods = ["session/update", None, "_baton/note", 'odd "méthode" ✓']
            for n in range(1500):  # several batches, the two runs interleaved in each
                run_id = first if n % 3 else second
                payload = {"n": n, "text": f"chunk {n} {'é' * (n % 7)}", "secret": CANARY, "big": "x" * (n % 200)}
                log.append(run_id, "from_agent" if n % 2 else "to_agent", methods[n % 4], payload)
            await log.flush()
            logged = {run_id: await log.read(run_id) for run_id in runs}
        await asyncio.to_thread(exported.flush)
        with receiver.lock:
            records = receiver.received.log_records()
            raw = b"".join(receiver.received.raw)
            headers = list(receiver.received.headers)
        spans = {run_id: run.trace for run_id, run in runs.items()}
        exported.shutdown(1.0)

    assert receiver.received.bad == []
    assert headers and all(h.get("content-encoding") == "gzip" for h in headers)
    assert CANARY.encode() not in raw
    for run_id, entries in logged.items():
        mine = [(resource, record) for resource, record in records if resource.get("run_id") == run_id]
        assert len(mine) == len(entries) == (1000 if run_id == first else 500)
        trace = spans[run_id]
        assert trace is not None
        for (_resource, record), entry in zip(mine, entries, strict=True):
            assert json.loads(record.body.string_value) == entry
            attributes = attributes_of(record.attributes)
            expected = {"seq": entry["seq"], "direction": entry["direction"]}
            if entry["method"] is not None:
                expected["event_type"] = entry["method"]
            assert attributes == expected
            assert record.time_unix_nano == ts_nanos(entry["ts"])
            assert record.observed_time_unix_nano >= record.time_unix_nano
            assert record.severity_text == "INFO" and record.severity_number == 9
            assert record.trace_id.hex() == trace.trace_id and record.span_id.hex() == trace.span_id
            assert record.flags == int(trace.run_span.get_span_context().trace_flags)  # sampled (and random)
        resource = mine[0][0]
        assert resource["service.name"] == "records" and resource["telemetry.sdk.language"] == "python"
        assert resource["agent"] == ("a" if run_id == first else "b")
        assert ("task_id" in resource, "owner" in resource) == ((True, True) if run_id == first else (False, False))
    scopes = {
        scope.scope.name for request in receiver.received.logs for r in request.resource_logs for scope in r.scope_logs
    }
    assert scopes == {"baton.session_log"}
    assert exported.health.summary() is None  # nothing lost


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_collector_that_is_down_costs_the_batches_counted(store: Store) -> None:
    port = free_port()
    exported = telemetry(f"http://127.0.0.1:{port}", OTEL_EXPORTER_OTLP_TIMEOUT="200", OTEL_METRICS_EXPORTER="none")
    run_id = (await store.create_run(agent="a")).id
    async with SessionLog(store, Redactor()) as log:
        log.observe_commits(exported.committed)
        exported.begin_run(run_id, task_id=None, agent="a", owner=None)
        log.open_run(run_id)
        for n in range(700):
            log.append(run_id, "from_agent", "session/update", {"n": n})
        await log.flush()
        assert len(await log.read(run_id)) == 700  # the log has everything
    await asyncio.to_thread(exported.flush)
    health = exported.health
    assert health.lost_items["logs"] == 700 and health.exported_items["logs"] == 0
    assert health.failed_batches["logs"] >= 1
    summary = exported.shutdown(1.0)
    assert summary is not None and f"127.0.0.1:{port}" in summary and "700 logs" in summary


class _Hanging(BaseHTTPRequestHandler):
    """A collector that takes the request and never answers (until the test ends)."""

    release = threading.Event()
    arrived = threading.Event()

    def do_POST(self) -> None:
        self.arrived.set()
        self.release.wait(30)

    def log_message(self, format: str, *args: object) -> None:
        pass


async def test_shutdown_waits_at_most_its_timeout_for_a_collector_that_hangs(store: Store) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hanging)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        exported = telemetry(f"http://127.0.0.1:{server.server_address[1]}", OTEL_METRICS_EXPORTER="none")
        run_id = (await store.create_run(agent="a")).id
        async with SessionLog(store, Redactor()) as log:
            log.observe_commits(exported.committed)
            exported.begin_run(run_id, task_id=None, agent="a", owner=None)
            log.open_run(run_id)
            for n in range(600):
                log.append(run_id, "from_agent", "session/update", {"n": n})
            await log.flush()
        assert await asyncio.to_thread(_Hanging.arrived.wait, 20)
        started = time.monotonic()
        summary = await asyncio.to_thread(exported.shutdown, 1.0)
        took = time.monotonic() - started
        # The export's timeout is 10 s: shutdown did not wait for it (a coarse bound, for a busy machine).
        assert took < 5, took
        assert summary is not None and "logs" in summary
    finally:
        _Hanging.release.set()
        server.shutdown()
        server.server_close()
