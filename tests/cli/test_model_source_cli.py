"""A run remembers where its model comes from (``model_source``): a run started on a scenario is
continued on it by ``baton resume RUN`` and by ``baton worker`` with no ``--scenario`` and no model
credentials anywhere; a run on a real endpoint without a key is still refused."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tests.cli._baton_cli import BatonCLI
from tests.cli.test_workers_cli import _wait_for
from tests.conftest import make_git_repo
from tests.runs.test_resume_crash import run_status

pytestmark = pytest.mark.claude


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "repo", {"README.md": "# r\n"})


def run_request(home: Path, run_id: str) -> dict[str, Any]:
    with sqlite3.connect(home / "baton.db") as connection:
        [(request,)] = connection.execute("SELECT request FROM runs WHERE id = ?", (run_id,)).fetchall()
    return dict(json.loads(request))


def park_on_scenario(baton: BatonCLI, repo: Path) -> tuple[str, str]:
    """``baton run --scenario gate-park --no-wait``: the run parks on its gate; (run id, gate id)."""
    baton.env["BATON_GATE_GRACE_SECONDS"] = "1"
    parked = baton("run", "go", "--repo", str(repo), "--scenario", "gate-park", "--no-wait", "--json")
    assert parked.returncode == 4, parked.describe()
    started = parked.json_lines()[0]
    assert started["type"] == "task.started"
    gates = json.loads(baton("gates", "--status", "pending", "--json").stdout)
    return str(started["run_id"]), str(gates[0]["id"])


@pytest.mark.timeout(240)
def test_resume_continues_a_run_on_the_scenario_it_started_on(baton: BatonCLI, repo: Path) -> None:
    assert "ANTHROPIC_API_KEY" not in baton.env
    run_id, gate_id = park_on_scenario(baton, repo)
    assert run_request(baton.home, run_id)["model_source"] == {"kind": "scenario", "scenario": "gate-park"}
    assert baton("approve", gate_id).returncode == 0
    resumed = baton("resume", run_id, "--json")  # what the park hint says: no --scenario
    assert resumed.returncode == 0, resumed.describe()
    assert (repo / "approved.txt").exists()
    assert "Resumed after the decision" in resumed.json_lines()[-1]["data"]["result"]
    # An ended run continues in a new run, on the same scenario too (which asks for its gate again).
    again = baton("resume", run_id, "once more", "--no-wait", "--json")
    assert again.returncode == 4, again.describe()
    assert "gate.opened" in [event["type"] for event in again.json_lines()]
    new_run = again.json_lines()[-1]["run_id"]
    assert new_run != run_id
    assert run_request(baton.home, new_run)["model_source"] == {"kind": "scenario", "scenario": "gate-park"}


@pytest.mark.timeout(240)
def test_a_worker_continues_a_parked_scenario_run_without_credentials(baton: BatonCLI, repo: Path) -> None:
    run_id, gate_id = park_on_scenario(baton, repo)
    worker = baton.start("worker", "--interval", "0.2")
    try:
        assert baton("approve", gate_id).returncode == 0
        _wait_for(lambda: run_status(baton.home / "baton.db", run_id) == "finished", timeout=120)
        worker[1].send_signal(signal.SIGTERM)
        stopped = baton.finish(worker, timeout=30)
    finally:
        baton.stop([worker])
    assert stopped.returncode == 0, stopped.describe()
    assert f"adopted run {run_id}" in stopped.stderr
    assert "model_credentials_missing" not in stopped.stderr and "pass --scenario" not in stopped.stderr
    assert (repo / "approved.txt").exists()


def test_an_endpoint_run_without_a_key_is_refused_with_advice_that_exists(baton: BatonCLI, repo: Path) -> None:
    refused = baton("run", "go", "--repo", str(repo), "--json")
    assert refused.returncode == 3, refused.describe()
    error = json.loads(refused.stderr)["error"]
    assert error["code"] == "model_credentials_missing"
    assert "pass --scenario" not in error["message"] and "baton resume RUN --scenario NAME" in error["message"]
