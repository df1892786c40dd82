"""The real ``opencode acp`` (opencode-ai 1.18.33): its mode matrix row, and a baton run that
yields what the same scenario yields with ``--agent claude``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import replace
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from tests.agents.codex.native import Recording, RecordingClient
from tests.agents.conftest import Finished, assert_log_whole, permission_answers, run_to_end
from tests.conftest import make_git_repo

from baton.agents.opencode import OpenCodeSetting, opencode_command
from baton.agents.registry import OPENCODE
from baton.agents.subprocess import LaunchContext, SubprocessAgent
from baton.config import Settings
from baton.runs import RunSpec
from baton.testing import Scenario, ScriptedModelServer

pytestmark = pytest.mark.timeout(90)

KEY = "sk-scripted-anthropic-key-0123456789abcdef"
COMMANDS = ["echo hi", "cat README.md", "ls", "git status", "touch made.txt"]
MATRIX = Scenario.from_dict(
    {
        "steps": [
            *({"tools": [{"name": "Bash", "input": {"command": c, "description": "run"}}]} for c in COMMANDS),
            {"tools": [{"name": "Read", "input": {"file_path": "{cwd}/README.md"}}]},
            {"tools": [{"name": "Write", "input": {"file_path": "{cwd}/new.txt", "content": "new\n"}}]},
            {"tools": [{"name": "Write", "input": {"file_path": "{cwd}/.claude/settings.json", "content": "{}\n"}}]},
        ],
        "final_text": "All done.",
    },
    name="matrix",
)


async def run_native(setting: OpenCodeSetting, workspace: Path, home: Path) -> Recording:
    recording = Recording()
    executable = OPENCODE.executable()
    assert executable is not None, "opencode-ai is not installed: run `make setup`"
    with ScriptedModelServer(MATRIX) as server:
        context = LaunchContext(
            "native-" + os.urandom(4).hex(), workspace, home, None, server.base_url, KEY, (), dict(os.environ), setting
        )
        agent = SubprocessAgent("opencode", opencode_command(context, executable))
        try:
            conn = connect_to_agent(RecordingClient(recording), await agent.start())  # type: ignore[arg-type]
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            response = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]), 60)
            recording.stop_reason = str(response.stop_reason)
            with contextlib.suppress(Exception):
                await conn.close()
        finally:
            await agent.aclose()
    return recording


@pytest.mark.slow  # OpenCode takes 5-10 s to start: the default run keeps only the comparison below
async def test_ask_all_sends_every_call_to_the_gatekeeper(tmp_path: Path) -> None:
    workspace = make_git_repo(tmp_path / "work", {"README.md": "# a repository\n"})
    recording = await run_native(OPENCODE.settings[0].config, workspace, tmp_path / "home")
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
async def test_without_a_permission_setting_nothing_asks(tmp_path: Path) -> None:
    workspace = make_git_repo(tmp_path / "work", {"README.md": "# a repository\n"})
    recording = await run_native(OpenCodeSetting(None), workspace, tmp_path / "home")
    assert recording.requests == []
    assert (workspace / "made.txt").exists()


def without_snapshots(done: Finished) -> list[str]:
    return [kind for kind in done.types() if kind != "snapshot.captured"]


@pytest.mark.claude
async def test_write_and_run_gives_the_same_event_types_as_claude(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "1")
    with ScriptedModelServer("write-and-run") as server:
        runs = []
        for agent in ("claude", "opencode"):
            repo = make_git_repo(tmp_path / agent / "repo", {"README.md": "# r\n"})
            settings = Settings.load({"BATON_HOME": str(tmp_path / agent / "home"), "PATH": os.environ["PATH"]})
            settings = replace(settings, anthropic_base_url=server.base_url, anthropic_api_key=KEY)
            spec = RunSpec(prompt="go", repo=repo, agent=agent, permission_mode="acceptEdits", allow=("Bash",))
            runs.append(run_to_end(settings, spec))
        claude, opencode = await asyncio.gather(*runs)
    assert without_snapshots(opencode) == without_snapshots(claude), f"{claude.types()}\n{opencode.types()}"
    assert_log_whole(opencode.entries)
    answers = [result["_meta"]["baton"] for _, result in permission_answers(opencode.entries)]
    assert [(a["decision"], a["reason"], a["tool_name"]) for a in answers] == [
        ("allow", "mode:acceptEdits", "Edit"),
        ("allow", "rule:Bash", "Bash"),
    ]
    assert (tmp_path / "opencode" / "repo" / "hello.txt").read_text() == "hello from baton\n"
