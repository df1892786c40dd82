"""The gemini row of the mode matrix (docs/agents.md), proven against the real ``gemini --acp``.

The same scripted turn (safe and writing commands, a read, writes inside the workspace and
under ``.claude/``) runs under baton's ``ask-all`` setting and under Gemini CLI's own policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.agents.native import READ, WRITES, matrix_scenario, run_native

from baton.agents.gemini import GeminiSetting
from baton.agents.registry import GEMINI, choose_setting
from baton.errors import RefusedError
from baton.gates import Gatekeeper, Policy

pytestmark = pytest.mark.timeout(60)

ASK_ALL = GEMINI.settings[0]
MATRIX = matrix_scenario(READ, *WRITES)


async def test_ask_all_sends_every_call_but_safe_commands_to_the_gatekeeper(workspace: Path, tmp_path: Path) -> None:
    recording = await run_native(GEMINI, ASK_ALL.config, MATRIX, workspace, tmp_path / "home")
    assert recording.stop_reason == "end_turn"
    asked = [(request["kind"], request["title"]) for request in recording.requests]
    assert asked == [
        ("execute", "touch made.txt"),
        ("read", "README.md"),
        ("edit", "Writing to new.txt"),
        ("edit", "Writing to .claude/settings.json"),
    ]
    ran = [call["title"] for call in recording.tool_calls.values() if call["kind"] == "execute"]
    assert ran[:4] == ["echo hi", "cat README.md", "ls", "git status"]  # unasked: Gemini's safe commands
    for options in recording.options:
        assert ("proceed_once", "allow_once") in options and ("cancel", "reject_once") in options
    assert (workspace / "made.txt").exists() and (workspace / ".claude" / "settings.json").exists()


@pytest.mark.slow
async def test_without_the_policy_reads_run_unasked_too(workspace: Path, tmp_path: Path) -> None:
    recording = await run_native(
        GEMINI, GeminiSetting("default", ask_every_tool=False), MATRIX, workspace, tmp_path / "h"
    )
    assert [request["kind"] for request in recording.requests] == ["execute", "edit", "edit"]


def test_a_policy_that_asks_for_bash_is_not_enforceable(tmp_path: Path) -> None:
    for mode in ("default", "plan"):
        with pytest.raises(RefusedError) as refused:
            choose_setting(GEMINI, Gatekeeper(Policy.build(mode), tmp_path))
        assert refused.value.code == "mode_not_enforceable"
        assert "`echo hi`" in " ".join(refused.value.details["reasons"])
        assert "--allow Bash would be enforceable" in refused.value.message
    accept = Gatekeeper(Policy.build("acceptEdits", allow=["Bash"]), tmp_path)
    assert choose_setting(GEMINI, accept).name == "ask-all"
