"""``baton run --agent gemini --scenario S``: the scripted model reaches an agent that reads its
endpoint from the environment only, and the environment is restored afterwards."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.cli._baton_cli import invoke_in_process

pytestmark = pytest.mark.timeout(60)


def test_a_gemini_run_with_a_scenario(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    args = ["run", "go", "--repo", str(repo), "--agent", "gemini", "--scenario", "write-and-run", "--json"]
    done = invoke_in_process(monkeypatch, tmp_path / "home", *args, "--mode", "acceptEdits", "--allow", "Bash")
    assert done.returncode == 0, done
    events = done.json_lines()
    assert events[0]["data"]["agent"] == "gemini" and events[-1]["type"] == "task.finished"
    assert [e["data"]["command"] for e in events if e["type"] == "command.finished"] == ["echo hi"]
    assert (repo / "hello.txt").read_text() == "hello from baton\n"
    assert "GEMINI_API_KEY" not in os.environ


def test_gemini_under_default_is_refused_before_anything_starts(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["run", "go", "--repo", str(repo), "--agent", "gemini", "--scenario", "write-and-run"]
    done = invoke_in_process(monkeypatch, tmp_path / "home", *args)
    assert done.returncode == 3
    assert done.stderr.startswith("baton: mode_not_enforceable: gemini cannot be made to ask"), done.stderr
    # One line that says what would work, not every call Gemini CLI makes unasked.
    [line] = done.stderr.splitlines()
    assert len(line) < 320, line
    assert line.endswith("; --allow Bash would be enforceable (`baton agents gemini` lists what it does unasked)"), line
    assert not (repo / "hello.txt").exists()
