"""The claude-acp row of the mode matrix (docs/agents.md), proven against the real claude-agent-acp.

The same scripted turn (read-only and writing commands, Read, Glob, Grep — also outside the
workspace —, writes inside the workspace and under ``.claude/``, an Edit) runs under baton's
``ask-all`` setting and under the adapter's own ``default`` mode without baton's hook.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from tests.agents.conftest import decisions, run_to_end
from tests.agents.native import COMMANDS, EDIT, GLOB, GREP_OUTSIDE, READ, WRITES, bash, matrix_scenario, run_native

from baton.agents.claude_acp import ClaudeAcpSetting
from baton.agents.registry import CLAUDE_ACP, bound_input_hash, choose_setting, claude_acp_bound_input
from baton.config import Settings
from baton.gates import Gatekeeper, Policy
from baton.runs import RunSpec
from baton.testing import ScriptedModelServer

pytestmark = [pytest.mark.timeout(60), pytest.mark.claude]

ASK_ALL = CLAUDE_ACP.settings[0]
KEY = "sk-scripted-anthropic-key-0123456789abcdef"
MATRIX = matrix_scenario(READ, GLOB, GREP_OUTSIDE, *WRITES, EDIT, bash("echo hi"))


async def test_ask_all_sends_every_call_to_the_gatekeeper(workspace: Path, tmp_path: Path) -> None:
    recording = await run_native(CLAUDE_ACP, ASK_ALL.config, MATRIX, workspace, tmp_path / "home", max_retries=1)
    assert recording.stop_reason == "end_turn"
    asked = [(r["kind"], r["rawInput"].get("command") or r["rawInput"].get("file_path")) for r in recording.requests]
    assert asked == [
        *(("execute", command) for command in COMMANDS),
        ("read", str(workspace / "README.md")),
        ("edit", str(workspace / "new.txt")),
        ("edit", str(workspace / ".claude/settings.json")),
        ("edit", str(workspace / "README.md")),
        ("execute", "echo hi"),
    ]
    # Glob and Grep are not offered under ask-all (they would run unasked): the calls fail.
    tools = {call["toolCallId"]: call["_meta"]["claudeCode"]["toolName"] for call in recording.tool_calls.values()}
    assert sorted(set(tools.values())) == ["Bash", "Edit", "Glob", "Grep", "Read", "Write"]
    assert (workspace / "made.txt").exists() and (workspace / "README.md").read_text() == "# b repository\n"
    for options in recording.options:
        assert ("allow", "allow_once") in options and ("reject", "reject_once") in options
    hashes = [bound_input_hash(claude_acp_bound_input(request)) for request in recording.requests]
    assert hashes[0] == hashes[-1] and len(set(hashes[:-1])) == len(hashes) - 1
    assert recording.requests[0]["toolCallId"] != recording.requests[-1]["toolCallId"]


@pytest.mark.slow
async def test_the_adapters_own_default_mode_runs_reads_and_safe_commands_unasked(
    workspace: Path, tmp_path: Path
) -> None:
    recording = await run_native(
        CLAUDE_ACP, ClaudeAcpSetting("default", ask_every_tool=False), MATRIX, workspace, tmp_path / "h", max_retries=1
    )
    asked = [r["rawInput"].get("command") or r["rawInput"].get("file_path") for r in recording.requests]
    # Only the writing command and the writes asked; echo, cat, ls, git status, Read, Glob and
    # Grep (on /etc/passwd, outside the workspace) ran without a request.
    written = [str(workspace / name) for name in ("new.txt", ".claude/settings.json", "README.md")]
    assert asked == ["touch made.txt", *written]


def test_ask_all_is_chosen_for_every_mode(tmp_path: Path) -> None:
    for mode, allow in [("default", ()), ("plan", ()), ("acceptEdits", ("Bash",)), ("bypassPermissions", ())]:
        gatekeeper = Gatekeeper(Policy.build(mode, allow=allow, agent_runs_unprivileged=True), tmp_path)
        assert choose_setting(CLAUDE_ACP, gatekeeper).name == "ask-all"


async def test_accept_edits_with_bash_allowed_runs_with_baton_deciding(settings: Settings, repo: Path) -> None:
    # The repository's own settings set the adapter's starting mode and allow Bash (ignored).
    (repo / ".claude").mkdir()
    repo_settings = {"permissions": {"defaultMode": "acceptEdits", "allow": ["Bash"]}}
    (repo / ".claude" / "settings.json").write_text(json.dumps(repo_settings))
    with ScriptedModelServer("write-and-run") as server:
        configured = replace(settings, anthropic_base_url=server.base_url, anthropic_api_key=KEY)
        spec = RunSpec(prompt="go", repo=repo, agent="claude-acp", permission_mode="acceptEdits", allow=("Bash",))
        done = await run_to_end(configured, spec)
    assert done.outcome.status == "finished", done.outcome
    assert decisions(done.entries) == [
        ("allow", "mode:acceptEdits", "Write"),
        ("allow", "rule:Bash", "Bash"),
    ]
    assert (repo / "hello.txt").read_text() == "hello from baton\n"
    new_session = next(e for e in done.entries if e["method"] == "session/new" and e["direction"] == "to_agent")
    assert new_session["payload"]["params"]["_meta"]["claudeCode"]["options"]["settingSources"] == ["user"]
    assert "session/set_mode" in done.methods()
