"""``baton run --agent codex --scenario …`` end to end through the console script (real codex-acp)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI, invoke_in_process
from tests.conftest import make_git_repo

pytestmark = pytest.mark.timeout(120)


def test_run_codex_with_a_scenario_streams_runner_events(baton: BatonCLI, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# r\n"})
    result = baton(
        "run", "go", "--repo", str(repo), "--agent", "codex", "--scenario", "write-and-run",
        "--mode", "acceptEdits", "--allow", "Bash", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.describe()
    events = result.json_lines()
    # Snapshots (captured after edits) are the snapshot module's business; the rest is the agent's.
    assert [e["type"] for e in events if e["type"] != "snapshot.captured"] == [
        "task.started", "message", "message", "file.changed", "message", "command.started",
        "command.finished", "message", "turn.finished", "task.finished",
    ]  # fmt: skip
    assert events[0]["data"]["agent"] == "codex"
    finished = next(e["data"] for e in events if e["type"] == "command.finished")
    assert finished["command"] == "echo hi" and finished["exit_code"] == 0
    assert (repo / "hello.txt").read_text() == "hello from baton\n"
    assert '"type"' not in result.stderr
    assert "scripted-" not in json.dumps(events)  # the scripted key never reaches the events


def test_run_codex_refuses_a_usd_budget(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# r\n"})
    result = invoke_in_process(
        monkeypatch,
        tmp_path / "home",
        "run",
        "go",
        "--repo",
        str(repo),
        "--agent",
        "codex",
        "--scenario",
        "plain",
        "--budget-usd",
        "1",
        "--json",
    )
    assert result.returncode == 3, result.describe()
    assert json.loads(result.stderr)["error"]["code"] == "budget_not_supported"
    assert result.stdout == ""


def test_run_codex_without_openai_credentials_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# r\n"})
    result = invoke_in_process(monkeypatch, tmp_path / "home", "run", "go", "--repo", str(repo), "--agent", "codex")
    assert result.returncode == 3, result.describe()
    assert "model_credentials_missing" in result.stderr and "OPENAI_API_KEY" in result.stderr
