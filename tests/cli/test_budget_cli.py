"""Budgets through the installed ``baton`` command: a run that reaches ``--budget-usd`` parks on a
``resource_limit`` gate (``--no-wait`` exits 4), ``baton continue GATE --budget-usd`` raises it
from another process, and ``baton resume`` finishes the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI
from tests.conftest import make_git_repo

pytestmark = pytest.mark.claude


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "repo", {"README.md": "# r\n"})


@pytest.mark.slow(seconds=40)  # five baton processes, two runs of Claude Code: ~40 s idle, minutes under load
@pytest.mark.timeout(600)
def test_a_reached_budget_parks_then_continue_and_resume_finish_the_run(baton: BatonCLI, repo: Path) -> None:
    scripted = ("--scenario", "write-and-run")
    run = baton(
        "run", "go", "--repo", str(repo), *scripted, "--mode", "acceptEdits", "--allow", "Bash(echo:*)",
        "--budget-usd", "0.001", "--no-wait", "--json",
    )  # fmt: skip
    assert run.returncode == 4, run.describe()
    events = run.json_lines()
    opened = [event for event in events if event["type"] == "gate.opened"]
    assert opened and "task.finished" not in [event["type"] for event in events]
    [gate] = json.loads(baton("gates", "--status", "pending", "--json").stdout)
    assert gate["kind"] == "resource_limit" and gate["input"]["limits"] == ["usd"]
    assert gate["summary"].startswith("Budget reached: cost $0.0016 of $0.001.")
    wrong = baton("review-plan", gate["id"], "approve")
    assert wrong.returncode == 3 and "gate_kind_mismatch" in wrong.stderr, wrong.describe()
    continued = baton("continue", gate["id"], "--budget-usd", "1")
    assert continued.returncode == 0, continued.describe()
    resumed = baton("resume", gate["run_id"], *scripted, "--json")
    assert resumed.returncode == 0, resumed.describe()
    finished = resumed.json_lines()[-1]
    assert finished["type"] == "task.finished" and "hi" in finished["data"]["result"]
    shown = json.loads(baton("show", gate["run_id"], "--json").stdout)
    assert shown["status"] == "finished"


@pytest.mark.timeout(300)
def test_a_run_stopped_at_its_turns_budget_keeps_its_cost(baton: BatonCLI, tmp_path: Path) -> None:
    """``--max-turns 2 --scenario demo``: Claude stops after two model turns (the gate says
    ``turns 2 of 2``); denied, the run fails ``budget_exhausted`` with what it cost."""
    from baton.demo import PROMPT, TEST_RULE, prepare_sample_repo

    repo = prepare_sample_repo(tmp_path / "calc")
    run = baton(
        "run", PROMPT, "--repo", str(repo), "--scenario", "demo", "--mode", "acceptEdits", "--allow", TEST_RULE,
        "--max-turns", "2", "--no-wait", "--json",
    )  # fmt: skip
    assert run.returncode == 4, run.describe()
    [gate] = json.loads(baton("gates", "--status", "pending", "--json").stdout)
    assert gate["summary"].startswith("Budget reached: turns 2 of 2.")
    spent = gate["input"]["spent"]["usd"]
    assert spent == pytest.approx(0.0016)  # two model requests
    assert baton("deny", gate["id"]).returncode == 0
    resumed = baton("resume", gate["run_id"])
    assert resumed.returncode == 1, resumed.describe()
    assert "budget_exhausted" in resumed.stdout and "cost $0.0016" in resumed.stdout, resumed.describe()
    shown = json.loads(baton("show", gate["run_id"], "--json").stdout)
    assert shown["status"] == "failed" and shown["total_cost_usd"] == pytest.approx(spent)
