"""The recorded codex-acp conversations (``tests/golden/samples/codex-acp-*.jsonl``) as baton logs
them, against their golden runner events; every agent message round-trips through ACP's models.

Regenerate on purpose with ``python -m tests.golden.regen`` and review the diff.
"""

from __future__ import annotations

import json

import pytest
from acp.schema import RequestPermissionRequest, SessionNotification
from tests.golden.build import GOLDEN
from tests.golden.codex import CODEX_SAMPLES, build_codex_sample

from baton.events.project import project


@pytest.mark.parametrize("name", CODEX_SAMPLES)
def test_codex_sample_projects_to_its_golden_events(name: str) -> None:
    entries = build_codex_sample(name)
    assert json.loads((GOLDEN / f"{name}.entries.json").read_text()) == entries
    assert json.loads((GOLDEN / f"{name}.events.json").read_text()) == project(entries)


@pytest.mark.parametrize("name", CODEX_SAMPLES)
def test_codex_sample_messages_are_valid_acp(name: str) -> None:
    for entry in build_codex_sample(name):
        params = entry["payload"].get("params")
        if entry["method"] == "session/update":
            model = SessionNotification.model_validate(params)
            assert model.model_dump(by_alias=True, exclude_none=True)["update"] == params["update"]
        elif entry["method"] == "session/request_permission" and params is not None:
            request = RequestPermissionRequest.model_validate(params)
            assert [option.option_id for option in request.options] == ["approved", "abort"]


def test_the_allowed_patch_and_the_shell_read_become_file_events() -> None:
    events = project(build_codex_sample("codex-acp-allow"))
    changed = [e["data"] for e in events if e["type"] == "file.changed"]
    read = [e["data"] for e in events if e["type"] == "file.read"]
    assert changed == [
        {
            "path": "hello.txt",
            "abs_path": "/home/dev/acpwork2/hello.txt",
            "change": "add",
            "tool": "Edit",
            "tool_call_id": "call_aef96f3b435142899004",
            "diff": {"old_text": None, "new_text": "hello from fake model\n"},
        }
    ]
    assert [(r["path"], r["tool"]) for r in read] == [("hello.txt", "Bash")]
    assert [e["type"] for e in events].count("turn.finished") == 2


def test_the_rejected_patch_is_a_denied_message_and_a_cancelled_turn() -> None:
    events = project(build_codex_sample("codex-acp-reject"))
    denied = [e["data"] for e in events if e["data"].get("denied")]
    assert denied == [{"role": "user", "text": "denied", "denied": True, "tool": "Edit"}]
    assert "file.changed" not in [e["type"] for e in events]
    turns = [e["data"]["stop_reason"] for e in events if e["type"] == "turn.finished"]
    assert turns == ["cancelled", "end_turn"]
