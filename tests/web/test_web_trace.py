"""A run's page names the OpenTelemetry trace of its execution (GET /v1/runs/{id}/trace), on a
server exporting to an OTLP receiver on loopback. The agent is a real subprocess
(``acp_script_agent.py env``, as ``--agent-cmd``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect
from tests.agents.conftest import SCRIPT
from tests.observability._receiver import OtlpReceiver, attributes_of, otlp_receiver
from tests.server._server import RunningServer, running_server
from tests.web.conftest import DESKTOP, sign_in, wait_ended

from baton.agents.command import COMMAND_AGENT
from baton.config import Settings
from baton.runs.spec import RunSpec
from baton.server import ServerConfig

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def exporting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[RunningServer, OtlpReceiver]]:
    for name in [name for name in os.environ if name.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
        environ = {"BATON_HOME": str(tmp_path / "baton-home"), "PATH": os.environ.get("PATH", "")}
        with running_server(Settings.load(environ), ServerConfig()) as server:
            yield server, receiver


def test_the_run_page_shows_the_trace_id(
    browser: Browser, exporting: tuple[RunningServer, OtlpReceiver], git_repo: Path
) -> None:
    server, receiver = exporting
    spec = RunSpec(
        prompt="TRACEPARENT",
        repo=git_repo,
        agent=COMMAND_AGENT,
        agent_command=(sys.executable, str(SCRIPT), "env"),
        trust_agent_permissions=True,
        permission_mode="acceptEdits",
        owner="local",
    )
    handle = server.call(lambda: server.baton.start(spec))
    server.state.handles[handle.run_id] = handle
    wait_ended(server, handle.run_id)
    answer = httpx.get(f"{server.base_url}/v1/runs/{handle.run_id}/trace", headers=server.headers())
    assert answer.status_code == 200, answer.text
    trace = answer.json()["trace"]
    missing = httpx.get(f"{server.base_url}/v1/runs/run_nope/trace", headers=server.headers())
    assert missing.status_code == 404
    assert receiver.wait_for(
        lambda received: any(
            span.name == "baton.run" and attributes_of(span.attributes)["run_id"] == handle.run_id
            for _r, span in received.spans()
        )
    )
    with receiver.lock:
        [run_span] = [
            span
            for _r, span in receiver.received.spans()
            if span.name == "baton.run" and attributes_of(span.attributes)["run_id"] == handle.run_id
        ]
    assert trace == {"trace_id": run_span.trace_id.hex(), "span_id": run_span.span_id.hex()}

    context = browser.new_context(viewport=DESKTOP)
    try:
        page = sign_in(context.new_page(), server)
        page.goto(f"{server.base_url}/runs/{handle.run_id}")
        fact = page.locator(".facts div").filter(has=page.locator("dt", has_text="Trace"))
        expect(fact.locator("dd")).to_have_text(trace["trace_id"], timeout=15_000)
    finally:
        context.close()
