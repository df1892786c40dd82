"""``baton run`` attached to a terminal (a pty) asks about every kind of gate, with the real
Claude Code and the scripted model: a question, a plan review (edited in $EDITOR, or rejected
with feedback) and a budget (continued with a new budget after a refused one); each decided
through the same ledger operations as ``baton answer|review-plan|continue``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.cli._baton_cli import BatonCLI
from tests.cli._terminal import TerminalSession, run_in_terminal
from tests.conftest import make_git_repo

from baton.cli._terminal_gates import parse_budget, parse_selection
from baton.errors import UsageError

pytestmark = pytest.mark.claude

EDITED_PLAN = "# Fix add\n\n1. Make add return a + b\n2. Run node --test\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "repo", {"README.md": "# r\n"})


# The run is what these tests are about: they read its gate and its log back in this process.


def only_gate(baton: BatonCLI, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    [gate] = json.loads(baton.here(monkeypatch, "gates", "--json").stdout)
    return dict(gate)


def finished_result(baton: BatonCLI, monkeypatch: pytest.MonkeyPatch, run_id: str) -> str:
    events = baton.here(monkeypatch, "logs", run_id, "--json").json_lines()
    finished = [event for event in events if event.get("type") == "task.finished"]
    assert len(finished) == 1, [event.get("type") for event in events]
    return str(finished[0]["data"]["result"])


def test_a_question_is_answered_at_the_terminal(baton: BatonCLI, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ("run", "go", "--repo", str(repo), "--scenario", "ask-question")
    replies = [("answer (a number", "7"), ("pick an offered option", "2"), ("answer (number(s)", "1, 2")]
    session = run_in_terminal(baton, args, replies)
    assert session.returncode == 0 and session.answered == 3, session.describe()
    assert "Which database should I use?" in session.shown and "2. SQLite — A single file" in session.shown
    gate = only_gate(baton, monkeypatch)
    assert gate["status"] == "answered" and gate["decided_by"] == "terminal"
    assert gate["decision"]["answers"] == [
        {"header": "Database", "selected": ["SQLite"]},
        {"header": "Extras", "selected": ["Caching", "Metrics"]},
    ]
    result = finished_result(baton, monkeypatch, gate["run_id"])
    assert '"Which database should I use?"="SQLite", "Which extras do you want?"="Caching, Metrics"' in result


def plan_review(baton: BatonCLI, repo: Path, replies: list[tuple[str, str]], editor: str) -> TerminalSession:
    args = ("run", "go", "--repo", str(repo), "--scenario", "plan-review", "--mode", "plan", "--allow", "Bash(echo:*)")
    return run_in_terminal(baton, args, replies, env={"EDITOR": editor, "VISUAL": ""})


def test_a_plan_edited_in_the_editor_is_what_the_model_reads(
    baton: BatonCLI, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "edited.md").write_text(EDITED_PLAN)
    editor = f'{sys.executable} -c "import shutil, sys; shutil.copy({str(tmp_path / "edited.md")!r}, sys.argv[1])"'
    session = plan_review(baton, repo, [("plan?", "e")], editor)
    assert session.returncode == 0 and session.answered == 1, session.describe()
    assert "│ 1. Read calc.js" in session.shown  # the plan was shown
    assert "[a]pprove / [r]eject with feedback / [e]dit" in session.shown
    gate = only_gate(baton, monkeypatch)
    assert gate["kind"] == "plan_review" and gate["decided_by"] == "terminal"
    assert gate["decision"]["decision"] == "edit" and gate["decision"]["edited_plan"] == EDITED_PLAN
    assert "Done. Tool result: after-plan" in finished_result(baton, monkeypatch, gate["run_id"])


@pytest.mark.slow
def test_a_plan_rejected_with_feedback_keeps_the_run_planning(
    baton: BatonCLI, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replies = [("plan?", "e"), ("unchanged", ""), ("plan?", "r"), ("feedback", "read the tests first")]
    session = plan_review(baton, repo, replies, "true")  # an editor that changes nothing: asked again
    assert session.returncode == 0 and session.answered == 4, session.describe()
    gate = only_gate(baton, monkeypatch)
    assert gate["status"] == "denied" and gate["decision"]["reason"] == "read the tests first"
    result = finished_result(baton, monkeypatch, gate["run_id"])
    assert "Plan mode is read-only" in result


def test_a_budget_is_continued_at_the_terminal_with_a_new_budget(
    baton: BatonCLI, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = (
        "run", "go", "--repo", str(repo), "--scenario", "write-and-run", "--mode", "acceptEdits",
        "--allow", "Bash(echo:*)", "--budget-usd", "0.001",
    )  # fmt: skip
    replies = [("continue?", "c"), ("new budget", "usd=-1"), ("continue?", "c"), ("new budget", "usd=1")]
    session = run_in_terminal(baton, args, replies)
    assert session.returncode == 0 and session.answered == 4, session.describe()
    assert "Budget reached: cost $0.0016 of $0.001" in session.shown and "invalid_argument" in session.shown
    assert "[c]ontinue / [s]top" in session.shown  # the keys are shown, not taken for markup
    gate = only_gate(baton, monkeypatch)
    assert gate["kind"] == "resource_limit" and gate["decided_by"] == "terminal"
    assert gate["decision"]["budget"] == {"usd": 1.0}
    assert json.loads(baton.here(monkeypatch, "show", gate["run_id"], "--json").stdout)["status"] == "finished"


def test_what_is_typed_at_the_terminal_is_read_strictly() -> None:
    options = ["Postgres", "SQLite"]
    assert parse_selection("2", options, multi=False, free=False) == ["SQLite"]
    assert parse_selection("sqlite", options, multi=False, free=False) == ["SQLite"]
    assert parse_selection("1 2", options, multi=True, free=False) == ["Postgres", "SQLite"]
    assert parse_selection("1,2,2", options, multi=True, free=True) == ["Postgres", "SQLite"]
    assert parse_selection("1 2", options, multi=False, free=True) == []  # one choice only
    assert parse_selection("3", options, multi=False, free=True) == []  # no such option, even with free text
    assert parse_selection("DuckDB", options, multi=False, free=True) == ["DuckDB"]
    assert parse_selection("DuckDB", options, multi=False, free=False) == []
    assert parse_selection("  ", options, multi=True, free=True) == []
    assert parse_budget("usd=2 turns=20, seconds=600") == {"usd": 2.0, "turns": 20.0, "seconds": 600.0}
    assert parse_budget("") == {}
    for bad in ("usd", "cost=2", "usd=two", "turns=2.5"):
        with pytest.raises(UsageError):
            parse_budget(bad)
