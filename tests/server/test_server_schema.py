"""Schemathesis over every operation of a real server: never a 5xx, responses match the schema.

A gate of each kind is opened pending; generated decisions are sent to the gate of their
endpoint's kind (so bodies are validated against real gates, until one is decided). The
workspace root (``BATON_WORKSPACE_ROOTS``) is a temporary folder holding one git
repository. Generated paths are refused (``repository_not_allowed``); the first
``REAL_RUNS`` generated run requests that would pass are pointed at that repository, so they
start the real Claude Code against the scripted model. The run-starting endpoint is bounded to
one run at a time: each started run is cancelled and awaited before the next case.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis.configuration import set_hypothesis_home_dir
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance
from tests.conftest import make_git_repo
from tests.server._server import RunningServer, running_server

from baton.config import Settings
from baton.gates.ledger import GateLedger
from baton.server import ServerConfig, create_app
from baton.testing import ScriptedModelServer

# The server runs in this process (a thread): what it draws from the global `random` (DBOS,
# launched to execute runs) is seen by Hypothesis as a strategy using `random`.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies:hypothesis.errors.HypothesisDeprecationWarning"
)

MAX_EXAMPLES = 30  # per operation
REAL_RUNS = 3  # generated run requests that really start an agent

# Hypothesis keeps a folder of its own; not in the checkout.
set_hypothesis_home_dir(str(Path(tempfile.gettempdir()) / "baton-tests-hypothesis"))


@dataclass
class ApiServer:
    server: RunningServer
    repo: Path
    gates: dict[str, str]  # kind → a gate opened pending (generated decisions land on real gates)
    started: list[str] = field(default_factory=list)


_GATES: dict[str, dict[str, Any]] = {
    "tool": {"tool_name": "Bash", "bound_call_id": "toolu_1", "bound_input_hash": "h1", "input": {"command": "ls"}},
    "question": {
        "bound_call_id": "toolu_2",
        "bound_input_hash": "h2",
        "questions": [{"question": "Which?", "header": "DB", "options": [{"label": "SQLite"}, {"label": "Postgres"}]}],
    },
    "plan_review": {"plan": "1. do it"},
    "resource_limit": {},
}
# The endpoint a generated request to a gate goes to → the kind of gate it gets.
_GATE_KIND = {"decide": "tool", "answer": "question", "plan-review": "plan_review", "continue": "resource_limit"}


def _open_gates(server: RunningServer) -> dict[str, str]:
    async def opened() -> dict[str, str]:
        store = server.baton.store
        ids = {}
        for kind, fields in _GATES.items():
            run = await store.create_run(agent="claude", owner="local", repo="/tmp/x")
            gate, _ = await GateLedger(store).open(run.id, kind, summary=kind, **fields)  # type: ignore[arg-type]
            ids[kind] = gate.id
        return ids

    return server.call(opened)


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    home = tmp_path_factory.mktemp("schema") / "baton-home"
    root = tmp_path_factory.mktemp("workspaces")
    repo = make_git_repo(root / "repo", {"README.md": "# a repository\n"})
    with ScriptedModelServer("plain") as model:
        environ = {
            "BATON_HOME": str(home),
            "PATH": os.environ.get("PATH", ""),
            "ANTHROPIC_BASE_URL": model.base_url,
            "ANTHROPIC_API_KEY": "sk-scripted-schema",
        }
        config = ServerConfig(workspace_roots=(root,), commands_per_minute=1_000_000, sse_heartbeat_seconds=0.2)
        with running_server(Settings.load(environ), config) as server:
            yield ApiServer(server, repo, _open_gates(server))


def _published_schema() -> dict[str, Any]:
    """The OpenAPI document the server serves (built here: parametrize needs it at import)."""
    with tempfile.TemporaryDirectory() as home:
        return create_app(Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": home})).openapi()


# GET /v1/gates/events never ends by itself (a live stream of every gate change, docs/web.md):
# its own tests read it (tests/server/test_server_web_api.py).
schema = schemathesis.openapi.from_dict(_published_schema()).exclude(path="/v1/gates/events")


@schema.parametrize()
@hypothesis_settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_every_operation(case: schemathesis.Case, api_server: ApiServer) -> None:
    server = api_server.server
    real_run = (
        case.method == "POST"
        and case.path == "/v1/runs"
        and isinstance(case.body, dict)
        and "repo" in case.body
        and len(api_server.started) < REAL_RUNS
    )
    if real_run:
        assert isinstance(case.body, dict)
        case.body["repo"] = str(api_server.repo)
    endpoint = case.path.rsplit("/", 1)[-1]
    if case.path.startswith("/v1/gates/{gate_id}/") and endpoint in _GATE_KIND and case.path_parameters:
        case.path_parameters["gate_id"] = api_server.gates[_GATE_KIND[endpoint]]
    response = case.call(base_url=server.base_url, headers=server.headers(), timeout=30)
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
    if real_run and response.status_code == 201:
        run_id = response.json()["id"]
        api_server.started.append(run_id)
        handle = server.state.handles[run_id]
        handle.cancel()
        server.call(handle.wait, timeout=60)  # one run at a time


def test_real_runs_were_started(api_server: ApiServer) -> None:
    """Runs from generated requests did start (else the endpoint was only seen refusing)."""
    assert api_server.started, "no generated run request started a run"
