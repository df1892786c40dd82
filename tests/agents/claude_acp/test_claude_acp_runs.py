"""``baton run --agent claude-acp`` yields what ``--agent claude`` yields; its recorded conversation
(``tests/golden/samples/claude-agent-acp-allow.jsonl``) projects to its golden events.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp.schema import RequestPermissionRequest, SessionNotification
from tests.agents.conftest import Finished, assert_log_whole, run_write_and_run
from tests.golden.build import GOLDEN
from tests.golden.codex import build_codex_sample

from baton.events.project import project

SAMPLE = "claude-agent-acp-allow"


@pytest.mark.claude
@pytest.mark.timeout(90)
async def test_write_and_run_gives_the_same_event_types_as_claude(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claude_write_and_run: Finished
) -> None:
    claude = claude_write_and_run
    claude_acp = await run_write_and_run(tmp_path, monkeypatch, "claude-acp")
    assert claude_acp.types(snapshots=False) == claude.types(snapshots=False), f"{claude.types()}\n{claude_acp.types()}"
    assert claude_acp.types().count("snapshot.captured") == claude.types().count("snapshot.captured")
    assert_log_whole(claude_acp.entries)
    started = next(e["data"] for e in claude_acp.events if e["type"] == "task.started")
    assert started["agent"] == "claude-acp"
    commands = [e["data"]["command"] for e in claude_acp.events if e["type"] == "command.finished"]
    assert commands == ["echo hi"]
    changed = [(e["data"]["path"], e["data"]["tool"]) for e in claude_acp.events if e["type"] == "file.changed"]
    assert changed == [("hello.txt", "Write")]
    # The agent's own messages are kept: Claude Code's tool name rides in _meta.claudeCode.
    raw = [e["raw"] for e in claude_acp.events if e["type"] == "file.changed"]
    assert raw[0]["params"]["update"]["_meta"]["claudeCode"]["toolName"] == "Write"


def test_the_recorded_conversation_projects_to_its_golden_events() -> None:
    entries = build_codex_sample(SAMPLE)
    assert json.loads((GOLDEN / f"{SAMPLE}.entries.json").read_text()) == entries
    assert json.loads((GOLDEN / f"{SAMPLE}.events.json").read_text()) == project(entries)
    for entry in entries:
        params = entry["payload"].get("params")
        if entry["method"] == "session/update":
            SessionNotification.model_validate(params)
        elif entry["method"] == "session/request_permission" and params is not None:
            request = RequestPermissionRequest.model_validate(params)
            assert [option.kind for option in request.options] == ["allow_always", "allow_once", "reject_once"]
    events = project(entries)
    commands = [e["data"]["command"] for e in events if e["type"] == "command.finished"]
    assert commands == ["touch acp_made.txt", "echo hi"]
    assert [e["data"]["tool"] for e in events if e["type"] == "file.changed"] == ["Write"]
