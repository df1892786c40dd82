"""The real ``kilo acp`` (@kilocode/cli 7.7.7, an OpenCode fork) on the scripted model's Anthropic
Messages: its mode matrix row, the shared scenario beside Claude, and human gates.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.agents.conftest import Finished, assert_log_whole, decisions, gated_run, run_write_and_run
from tests.agents.native import COMMANDS, READ, WRITES, matrix_scenario, run_native
from tests.conftest import make_git_repo
from tests.runs.test_gates_claude import answers

from baton.agents.opencode import OpenCodeSetting
from baton.agents.registry import KILO
from baton.config import Settings
from baton.events.project import project

pytestmark = pytest.mark.timeout(120)

MATRIX = matrix_scenario(READ, *WRITES, description="run")


async def test_ask_all_sends_every_call_to_the_gatekeeper(workspace: Path, tmp_path: Path) -> None:
    recording = await run_native(KILO, KILO.settings[0].config, MATRIX, workspace, tmp_path / "home", max_retries=None)
    assert recording.stop_reason == "end_turn"
    assert [r["kind"] for r in recording.requests] == ["execute"] * 5 + ["read", "edit", "edit"]
    assert [r["rawInput"]["command"] for r in recording.requests[:5]] == COMMANDS
    assert [r["rawInput"]["filepath"] for r in recording.requests[6:]] == [
        str(workspace / "new.txt"),
        str(workspace / ".claude/settings.json"),
    ]
    for options in recording.options:
        assert any(kind == "allow_once" for _, kind in options) and any(kind == "reject_once" for _, kind in options)
    assert (workspace / "made.txt").exists()


async def test_a_repositorys_kilo_config_does_not_stop_the_asking(tmp_path: Path) -> None:
    # A repository's kilo.json / opencode.json allowing everything is not read (KILO_DISABLE_PROJECT_CONFIG).
    allow_all = json.dumps({"permission": {"*": "allow"}})
    files = {"kilo.json": allow_all, "opencode.json": allow_all, ".kilo/kilo.json": allow_all}
    workspace = make_git_repo(tmp_path / "work", {"README.md": "# a repository\n", **files})
    recording = await run_native(KILO, KILO.settings[0].config, MATRIX, workspace, tmp_path / "home", max_retries=None)
    assert [r["kind"] for r in recording.requests] == ["execute"] * 5 + ["read", "edit", "edit"]


@pytest.mark.slow
async def test_kilos_own_defaults_run_writes_and_most_commands_unasked(workspace: Path, tmp_path: Path) -> None:
    recording = await run_native(KILO, OpenCodeSetting(None), MATRIX, workspace, tmp_path / "home", max_retries=None)
    # Only `git status` is asked; `touch made.txt`, the read and both writes ran without asking.
    assert [r["rawInput"].get("command") for r in recording.requests] == ["git status"]
    assert (workspace / "made.txt").exists() and (workspace / "new.txt").exists()
    assert (workspace / ".claude/settings.json").exists()


# -- runs through baton ------------------------------------------------------------------------


@pytest.mark.claude
async def test_write_and_run_gives_the_same_event_types_as_claude(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claude_write_and_run: Finished
) -> None:
    claude = claude_write_and_run
    kilo = await run_write_and_run(tmp_path, monkeypatch, "kilo")
    assert kilo.types(snapshots=False) == claude.types(snapshots=False), f"{claude.types()}\n{kilo.types()}"
    assert_log_whole(kilo.entries)
    assert decisions(kilo.entries) == [("allow", "mode:acceptEdits", "Edit"), ("allow", "rule:Bash", "Bash")]
    assert (tmp_path / "kilo" / "repo" / "hello.txt").read_text() == "hello from baton\n"
    [changed] = [event["data"] for event in kilo.events if event["type"] == "file.changed"]
    assert (changed["path"], changed["change"], changed["tool"]) == ("hello.txt", "add", "Write")
    commands = [e["data"]["command"] for e in kilo.events if e["type"] == "command.finished"]
    assert commands == [e["data"]["command"] for e in claude.events if e["type"] == "command.finished"]


# -- human gates -------------------------------------------------------------------------------


async def test_kilo_waits_for_an_approval(settings: Settings, repo: Path) -> None:
    outcome, entries = await gated_run(settings, repo, "kilo", {"decision": "approve"})
    assert outcome.status == "finished", outcome
    assert (repo / "approved.txt").exists()
    [answer] = answers(entries)
    assert answer["decision"] == "allow" and answer["reason"] == "human"
    finished = [e["data"] for e in project(entries) if e["type"] == "command.finished"]
    assert [data["command"] for data in finished] == ["touch approved.txt"]


async def test_kilo_gets_a_denial(settings: Settings, repo: Path) -> None:
    outcome, entries = await gated_run(settings, repo, "kilo", {"decision": "deny", "reason": "no"})
    assert outcome.status == "finished", outcome
    assert not (repo / "approved.txt").exists()
    [answer] = answers(entries)
    assert answer["decision"] == "deny"
