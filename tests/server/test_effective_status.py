"""One run object on every face: a run recorded as ``running`` whose executor died is
``interrupted`` (reason ``executor_dead``) in ``GET /v1/runs``, ``GET /v1/runs/{id}``,
``baton runs --json``, ``baton show --json`` and ``Baton.runs()`` alike (the HTTP routes
once showed the stored ``running``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.cli._baton_cli import invoke_in_process
from tests.server._server import RunningServer, running_server

from baton.config import Settings
from baton.runs.executors import this_executor_id
from baton.store import RunRecord


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    settings = Settings.load(
        {"BATON_WORKSPACE": "in-place", "BATON_HOME": str(tmp_path / "baton-home"), "PATH": os.environ.get("PATH", "")}
    )
    with running_server(settings) as running:
        yield running


def test_a_run_whose_executor_died_is_interrupted_through_http_cli_and_python(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = this_executor_id().rsplit(":", 1)[0] + ":1"  # this pid with another start time: a process that is gone

    async def make(executor: str) -> RunRecord:
        store = server.baton.store
        record = await store.create_run(agent="claude", owner="local", repo="/tmp/x")
        return await store.update_run(record.id, status="running", status_reason="started", executor_id=executor)

    dead = server.call(lambda: make(gone))
    alive = server.call(lambda: make(this_executor_id()))
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as client:
        one = client.get(f"/v1/runs/{dead.id}").json()
        listed = {run["id"]: run for run in client.get("/v1/runs").json()["runs"]}
        only = client.get("/v1/runs", params={"status": "interrupted"}).json()["runs"]
        still_running = client.get("/v1/runs", params={"status": "running"}).json()["runs"]
    assert (one["status"], one["status_reason"]) == ("interrupted", "executor_dead")
    assert listed[dead.id] == one
    assert (listed[alive.id]["status"], listed[alive.id]["status_reason"]) == ("running", "started")
    assert [run["id"] for run in only] == [dead.id]
    assert [run["id"] for run in still_running] == [alive.id]

    home = server.state.settings.home
    from_cli = {run["id"]: run for run in json.loads(invoke_in_process(monkeypatch, home, "runs", "--json").stdout)}
    assert from_cli[dead.id] == one and from_cli[alive.id] == listed[alive.id]
    shown = json.loads(invoke_in_process(monkeypatch, home, "show", dead.id, "--json").stdout)
    assert {name: shown[name] for name in one} == one and shown["executor_alive"] is False

    from_python = {record.id: record for record in server.call(server.baton.runs)}
    assert from_python[dead.id].to_dict() == one
