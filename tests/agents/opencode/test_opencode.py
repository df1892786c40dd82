"""The real ``opencode acp`` (opencode-ai 1.18.33): its mode matrix row, and a baton run that
yields what the same scenario yields with ``--agent claude``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.agents.conftest import Finished, assert_log_whole, decisions, run_write_and_run
from tests.agents.native import COMMANDS, READ, WRITES, matrix_scenario, run_native

from baton.agents.opencode import OpenCodeSetting
from baton.agents.registry import OPENCODE

pytestmark = pytest.mark.timeout(90)

MATRIX = matrix_scenario(READ, *WRITES, description="run")


@pytest.mark.slow  # OpenCode takes 5-10 s to start: the default run keeps only the comparison below
async def test_ask_all_sends_every_call_to_the_gatekeeper(workspace: Path, tmp_path: Path) -> None:
    recording = await run_native(
        OPENCODE, OPENCODE.settings[0].config, MATRIX, workspace, tmp_path / "home", max_retries=None
    )
    assert recording.stop_reason == "end_turn"
    assert [r["kind"] for r in recording.requests] == ["execute"] * 5 + ["read", "edit", "edit"]
    assert [r["rawInput"]["command"] for r in recording.requests[:5]] == COMMANDS
    assert [r["rawInput"]["filepath"] for r in recording.requests[6:]] == [
        str(workspace / "new.txt"),
        str(workspace / ".claude/settings.json"),
    ]
    for options in recording.options:
        assert any(kind == "allow_once" for _, kind in options) and any(kind == "reject_once" for _, kind in options)


@pytest.mark.slow
async def test_without_a_permission_setting_nothing_asks(workspace: Path, tmp_path: Path) -> None:
    recording = await run_native(
        OPENCODE, OpenCodeSetting(None), MATRIX, workspace, tmp_path / "home", max_retries=None
    )
    assert recording.requests == []
    assert (workspace / "made.txt").exists()


@pytest.mark.claude
async def test_write_and_run_gives_the_same_event_types_as_claude(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claude_write_and_run: Finished
) -> None:
    claude = claude_write_and_run
    opencode = await run_write_and_run(tmp_path, monkeypatch, "opencode")
    assert opencode.types(snapshots=False) == claude.types(snapshots=False), f"{claude.types()}\n{opencode.types()}"
    assert_log_whole(opencode.entries)
    assert decisions(opencode.entries) == [
        ("allow", "mode:acceptEdits", "Edit"),
        ("allow", "rule:Bash", "Bash"),
    ]
    assert (tmp_path / "opencode" / "repo" / "hello.txt").read_text() == "hello from baton\n"
    [changed] = [event["data"] for event in opencode.events if event["type"] == "file.changed"]
    assert (changed["path"], changed["change"], changed["tool"]) == ("hello.txt", "add", "Write")
    assert changed["diff"]["new_text"] == "hello from baton\n"
