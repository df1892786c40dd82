"""An agent process gets the run's W3C ``TRACEPARENT`` in its environment (the OpenTelemetry
environment carrier): an agent that traces joins the run's trace. The agent here is a real
subprocess, ``acp_script_agent.py env`` started as ``--agent-cmd``, that says what its
environment holds."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from tests.agents.conftest import SCRIPT
from tests.observability._receiver import attributes_of, otlp_receiver

from baton.agents.command import COMMAND_AGENT
from baton.config import Settings
from baton.events.entry import LogEntry
from baton.runs import Baton, RunSpec

pytestmark = pytest.mark.timeout(60)

COMMAND = (sys.executable, str(SCRIPT), "env")


@pytest.fixture(autouse=True)
def clean_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("OTEL_")]:
        monkeypatch.delenv(name)


async def run_env_agent(settings: Settings, repo: Path) -> tuple[str, list[LogEntry], dict[str, str | None]]:
    spec = RunSpec(
        prompt="TRACEPARENT TRACESTATE BATON_RUN_ID",
        repo=repo,
        agent=COMMAND_AGENT,
        agent_command=COMMAND,
        trust_agent_permissions=True,
        permission_mode="acceptEdits",
    )
    async with Baton(settings) as baton:
        handle = await baton.start(spec)
        outcome = await handle.wait()
        assert outcome.status == "finished", outcome
        entries = await baton.log.read(handle.run_id)
    [said] = [
        e["payload"]["params"]["update"]["content"]["text"]
        for e in entries
        if e["method"] == "session/update"
        and e["payload"]["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
    ]
    return handle.run_id, entries, json.loads(said)


async def test_the_agent_process_has_the_runs_traceparent(
    settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with otlp_receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
        run_id, entries, environment = await run_env_agent(settings, repo)
        with receiver.lock:
            spans = [span for _resource, span in receiver.received.spans()]
    [run] = [s for s in spans if s.name == "baton.run" and attributes_of(s.attributes)["run_id"] == run_id]
    [note] = [e["payload"]["params"] for e in entries if e["method"] == "_baton/trace"]
    traceparent = environment["TRACEPARENT"]
    assert traceparent is not None
    version, trace_id, parent_id, flags = traceparent.split("-")
    # The W3C form, naming the run's span (the agent starts before its first turn).
    assert (version, trace_id, parent_id) == ("00", run.trace_id.hex(), run.span_id.hex())
    assert (trace_id, parent_id) == (note["trace_id"], note["span_id"])
    assert int(flags, 16) & 1  # sampled
    assert environment["TRACESTATE"] is None and environment["BATON_RUN_ID"] == run_id


async def test_nothing_configured_gives_the_agent_no_traceparent(
    settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not even baton's own: the agent's environment is an allow-list.
    monkeypatch.setenv("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    run_id, entries, environment = await run_env_agent(settings, repo)
    assert environment == {"TRACEPARENT": None, "TRACESTATE": None, "BATON_RUN_ID": run_id}
    assert not [e for e in entries if e["method"] == "_baton/trace"]
