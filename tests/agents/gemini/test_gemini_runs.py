"""``baton run --agent gemini`` yields what ``--agent claude`` yields; the recorded conversation
(``tests/golden/samples/gemini-acp-allow.jsonl``) projects to its golden events.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp.schema import RequestPermissionRequest, SessionNotification
from tests.agents.conftest import Finished, assert_log_whole, decisions, run_write_and_run
from tests.golden.build import GOLDEN
from tests.golden.codex import build_codex_sample

from baton.agents.registry import GEMINI, bound_input_hash, gemini_bound_input, gemini_tool_calls
from baton.events.project import project

SAMPLE = "gemini-acp-allow"


@pytest.mark.claude
@pytest.mark.timeout(90)
async def test_write_and_run_gives_the_same_event_types_as_claude(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claude_write_and_run: Finished
) -> None:
    claude = claude_write_and_run
    gemini = await run_write_and_run(tmp_path, monkeypatch, "gemini")
    assert gemini.types(snapshots=False) == claude.types(snapshots=False), f"{claude.types()}\n{gemini.types()}"
    assert_log_whole(gemini.entries)
    assert [e["data"]["command"] for e in gemini.events if e["type"] == "command.finished"] == ["echo hi"]
    assert [(e["data"]["path"], e["data"]["change"]) for e in gemini.events if e["type"] == "file.changed"] == [
        ("hello.txt", "add")
    ]
    # Only the write is asked: Gemini CLI runs `echo hi` unasked (a safe command), which the policy allows.
    assert decisions(gemini.entries) == [("allow", "mode:acceptEdits", "Write")]


def test_the_recorded_conversation_projects_to_its_golden_events() -> None:
    entries = build_codex_sample(SAMPLE)
    assert json.loads((GOLDEN / f"{SAMPLE}.entries.json").read_text()) == entries
    assert json.loads((GOLDEN / f"{SAMPLE}.events.json").read_text()) == project(entries)
    requests = []
    for entry in entries:
        params = entry["payload"].get("params")
        if entry["method"] == "session/update":
            SessionNotification.model_validate(params)
        elif entry["method"] == "session/request_permission" and params is not None:
            request = RequestPermissionRequest.model_validate(params)
            assert [o.option_id for o in request.options] == ["proceed_always", "proceed_once", "cancel"]
            requests.append(params["toolCall"])
    events = project(entries)
    assert [e["data"]["command"] for e in events if e["type"] == "command.finished"] == ["echo hi"]
    assert [(e["data"]["path"], e["data"]["change"]) for e in events if e["type"] == "file.changed"] == [
        ("hello.txt", "add")
    ]
    # No rawInput, no tool name: the write is judged from its diff, bound by kind, title, content, locations.
    [request] = requests
    assert "rawInput" not in request
    raw = {key: request[key] for key in ("title", "locations", "content")}
    [call] = gemini_tool_calls(request["toolCallId"], request["kind"], raw)
    assert (call.tool_name, call.input) == ("Write", {"file_path": "/home/dev/gacp-allow/hello.txt"})
    bound = gemini_bound_input(request)
    assert set(bound) == {"kind", "title", "content", "locations"}
    assert bound_input_hash(bound) == bound_input_hash(gemini_bound_input({**request, "toolCallId": "other"}))
    assert GEMINI.name == "gemini"
