"""OTLP/HTTP export of session logs, against a receiver on loopback run by the test."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from baton.store import Redactor, SessionLog, Store
from baton.store.otel import OtlpLogExporter, endpoint_from_environment

pytestmark = pytest.mark.timeout(20)

CANARY = "sk-ant-canary-otel-0123456789"


class Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.received = threading.Event()
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/logs"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append((self.path, self.headers["Content-Type"], json.loads(body)))
        self.server.received.set()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def records(receiver: Receiver) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    found = []
    for _path, _type, body in receiver.requests:
        for resource_logs in body["resourceLogs"]:
            resource = {a["key"]: a["value"]["stringValue"] for a in resource_logs["resource"]["attributes"]}
            for scope_logs in resource_logs["scopeLogs"]:
                found += [(resource, record) for record in scope_logs["logRecords"]]
    return found


async def test_committed_entries_are_exported_redacted_with_run_and_task(store: Store, receiver: Receiver) -> None:
    run = await store.create_run(agent="claude", task_id="task_1")
    async with SessionLog(store, Redactor([CANARY])) as log:
        log.open_run(run.id)
        exporter = OtlpLogExporter(receiver.endpoint, max_batch=4, flush_interval=0.05)
        export = asyncio.create_task(exporter.export_run(log, run.id, task_id="task_1"))
        for n in range(10):
            log.append(run.id, "from_agent", "session/update", {"params": {"n": n, "key": CANARY}})
        await asyncio.to_thread(receiver.received.wait, 5)
        log.append(run.id, "baton", None, {"params": {"n": 10}})
        log.close_run(run.id)
        assert await export == 11
    found = records(receiver)
    assert {path for path, _type, _body in receiver.requests} == {"/v1/logs"}
    assert {content_type for _path, content_type, _body in receiver.requests} == {"application/json"}
    assert [json.loads(record["body"]["stringValue"])["params"]["n"] for _resource, record in found] == list(range(11))
    assert all(resource == {"service.name": "baton", "run_id": run.id, "task_id": "task_1"} for resource, _ in found)
    first = found[0][1]
    attributes = {a["key"]: next(iter(a["value"].values())) for a in first["attributes"]}
    assert attributes == {"seq": "1", "direction": "from_agent", "method": "session/update"}
    assert int(first["timeUnixNano"]) > 1_700_000_000 * 10**9
    assert CANARY not in json.dumps(receiver.requests)
    assert "[REDACTED]" in json.dumps(receiver.requests)


async def test_a_collector_that_is_down_costs_batches_not_the_run(store: Store) -> None:
    run = await store.create_run(agent="claude")
    async with SessionLog(store, Redactor()) as log:
        log.open_run(run.id)
        exporter = OtlpLogExporter("http://127.0.0.1:9/v1/logs", max_batch=2, flush_interval=0.05)
        export = asyncio.create_task(exporter.export_run(log, run.id))
        for n in range(5):
            log.append(run.id, "baton", None, {"n": n})
        log.close_run(run.id)
        assert await export == 0
        assert len(await log.read(run.id)) == 5


def test_the_endpoint_comes_from_the_standard_variables() -> None:
    assert endpoint_from_environment({}) is None
    assert endpoint_from_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/logs"
    assert endpoint_from_environment({"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://c/logs"}) == "http://c/logs"
