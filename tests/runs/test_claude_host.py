"""The real Claude Code through baton's host, offline: the log is whole, gapless and redacted.

Each test runs the bundled Claude Code against the scripted model server and checks the
session log in SQLite (issue "Foundation", section "Tests").
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import make_git_repo

from baton.agents.claude.environment import bundled_claude_binary
from baton.agents.processes import run_process_ids
from baton.config import Settings
from baton.events.entry import LogEntry
from baton.runs import Baton, RunOutcome, RunSpec
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.claude

MODEL_KEY = "sk-scripted-model-key-0123456789abcdef"


@contextmanager
def scripted(settings: Settings, scenario: str) -> Iterator[tuple[Settings, ScriptedModelServer]]:
    with ScriptedModelServer(scenario) as server:
        yield replace(settings, anthropic_base_url=server.base_url, anthropic_api_key=MODEL_KEY), server


async def run_to_end(settings: Settings, spec: RunSpec) -> tuple[RunOutcome, list[LogEntry]]:
    async with Baton(settings) as baton:
        outcome = await baton.run(spec)
        entries = await baton.log.read(outcome.run_id)
    return outcome, entries


def assert_log_whole(entries: list[LogEntry]) -> None:
    assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1))
    directions = {entry["direction"] for entry in entries}
    assert {"to_agent", "from_agent", "baton"} <= directions
    assert entries[0]["method"] == "_baton/run_started"
    assert entries[-1]["method"] == "_baton/status"
    assert entries[-1]["payload"]["params"]["status"] in ("finished", "failed", "cancelled")


def decisions(entries: list[LogEntry]) -> dict[str, dict[str, Any]]:
    """tool_call_id → the host's answer (``_meta.baton``) to its permission request."""
    asked: dict[Any, str] = {}
    answered: dict[str, dict[str, Any]] = {}
    for entry in entries:
        payload = entry["payload"]
        if entry["method"] != "session/request_permission":
            continue
        if entry["direction"] == "from_agent":
            asked[payload["id"]] = payload["params"]["toolCall"]["toolCallId"]
        else:
            answered[asked[payload["id"]]] = payload["result"]["_meta"]["baton"]
    return answered


def tool_calls(entries: list[LogEntry]) -> dict[str, dict[str, Any]]:
    calls: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry["method"] == "session/update" and entry["direction"] == "from_agent":
            update = entry["payload"]["params"]["update"]
            if update.get("sessionUpdate") == "tool_call":
                calls[update["toolCallId"]] = update
    return calls


async def test_write_and_run_logs_every_message_and_every_decision(settings: Settings, repo: Path) -> None:
    with scripted(settings, "write-and-run") as (configured, server):
        spec = RunSpec(prompt="go", repo=repo, permission_mode="acceptEdits", allow=("Bash(echo:*)",))
        outcome, entries = await run_to_end(configured, spec)
    assert outcome.status == "finished", outcome
    assert (repo / "hello.txt").read_text().startswith("hello")
    assert_log_whole(entries)
    calls = tool_calls(entries)
    answers = decisions(entries)
    assert set(answers) == set(calls) and len(calls) == 2
    by_tool = {calls[call_id]["_meta"]["baton"]["tool_name"]: answers[call_id] for call_id in calls}
    assert by_tool["Write"] == {
        "decision": "allow",
        "reason": "mode:acceptEdits",
        "message": by_tool["Write"]["message"],
        "bound_call_id": by_tool["Write"]["bound_call_id"],
        "bound_input_hash": by_tool["Write"]["bound_input_hash"],
        "tool_name": "Write",
    }
    assert len(by_tool["Write"]["bound_input_hash"]) == 64
    assert by_tool["Bash"]["decision"] == "allow" and by_tool["Bash"]["reason"] == "rule:Bash(echo:*)"
    methods = [entry["method"] for entry in entries]
    for method in ("initialize", "session/new", "session/prompt", "_baton/agent_session", "_baton/usage"):
        assert method in methods
    assert "_baton/turn_complete" in methods
    assert len(server.requests) >= 3


async def test_two_tool_calls_in_one_turn_are_each_decided(settings: Settings, repo: Path) -> None:
    with scripted(settings, "two-tools") as (configured, _):
        outcome, entries = await run_to_end(configured, RunSpec(prompt="go", repo=repo, permission_mode="acceptEdits"))
    assert outcome.status == "finished"
    assert (repo / "a.txt").exists() and (repo / "b.txt").exists()
    assert_log_whole(entries)
    answers = decisions(entries)
    assert len(answers) == 2 and all(answer["decision"] == "allow" for answer in answers.values())


async def test_a_denial_by_rule_reaches_claude_with_its_reason(settings: Settings, repo: Path) -> None:
    # (what the policy says to ask about opens a gate: tests/runs/test_gates_claude.py)
    with scripted(settings, "needs-approval") as (configured, _):
        spec = RunSpec(prompt="go", repo=repo, deny=("Bash(touch:*)",))
        outcome, entries = await run_to_end(configured, spec)
    assert outcome.status == "finished"
    assert not (repo / "approved.txt").exists()
    [answer] = decisions(entries).values()
    assert answer["decision"] == "deny" and answer["reason"] == "rule:Bash(touch:*)"


async def test_repository_settings_and_hooks_are_never_loaded(settings: Settings, tmp_path: Path) -> None:
    claude_settings = {
        "permissions": {"allow": ["Bash"]},
        "hooks": {
            "PreToolUse": [
                {"matcher": "*", "hooks": [{"type": "command", "command": "touch hook-ran.txt"}]},
            ]
        },
    }
    hostile = make_git_repo(tmp_path / "hostile", {".claude/settings.json": json.dumps(claude_settings)})
    with scripted(settings, "needs-approval") as (configured, _):
        # The repository's "allow Bash" is not baton's: the call asks, and its gate expires unanswered.
        expiring = replace(configured, gate_expiry_seconds=0.5)
        outcome, entries = await run_to_end(expiring, RunSpec(prompt="go", repo=hostile))
    assert outcome.status == "finished"
    assert not (hostile / "approved.txt").exists()
    assert not (hostile / "hook-ran.txt").exists()
    [answer] = decisions(entries).values()
    assert answer["decision"] == "deny" and answer["reason"] == "timeout"


async def test_canary_secret_never_reaches_the_agent_and_the_key_is_redacted(
    settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = "baton-canary-" + os.urandom(8).hex()
    monkeypatch.setenv("BATON_TEST_CANARY", canary)
    with scripted(settings, "print-env") as (configured, server):
        spec = RunSpec(prompt="go", repo=repo, allow=("Bash(env)",))
        outcome, entries = await run_to_end(configured, spec)
    assert outcome.status == "finished"
    text = json.dumps(entries)
    assert "ANTHROPIC_API_KEY=[REDACTED]" in text  # the tool really printed the environment
    assert canary not in text
    assert MODEL_KEY not in text
    # The model saw the tool output too: the canary was not in it.
    assert canary not in json.dumps([request.body for request in server.requests])


async def test_cancel_mid_command_ends_the_turn_cancelled_and_leaves_no_process(settings: Settings, repo: Path) -> None:
    with scripted(settings, "long-command") as (configured, _):
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo, allow=("Bash(sleep:*)", "Bash(echo:*)")))
            await _until_command_runs(baton.entries(handle.run_id))
            handle.cancel()
            outcome = await asyncio.wait_for(handle.wait(), 30)
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "cancelled" and outcome.stop_reason == "cancelled"
    assert_log_whole(entries)
    turn = [entry for entry in entries if entry["method"] == "_baton/turn_complete"]
    assert turn and turn[-1]["payload"]["params"]["stop_reason"] == "cancelled"
    assert not run_process_ids(handle.run_id)


async def _until_command_runs(entries: AsyncIterator[LogEntry]) -> None:
    async for entry in entries:
        if entry["method"] == "session/request_permission" and entry["direction"] == "to_agent":
            await asyncio.sleep(0.5)  # let the allowed `sleep` start
            return


async def test_garbage_and_truncated_lines_from_the_agent_are_logged(
    settings: Settings, repo: Path, tmp_path: Path
) -> None:
    wrapper = tmp_path / "noisy-claude"
    wrapper.write_text(
        "#!/bin/sh\n"
        "echo 'this line is not JSON'\n"
        'printf \'%s\\n\' \'{"type": "assistant", "mess\'\n'
        f'exec "{bundled_claude_binary()}" "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    with scripted(replace(settings, claude_binary=wrapper), "plain") as (configured, _):
        outcome, entries = await run_to_end(configured, RunSpec(prompt="go", repo=repo))
    assert outcome.status == "finished"
    assert_log_whole(entries)
    malformed = [entry["payload"]["params"]["line"] for entry in entries if entry["method"] == "_baton/malformed_line"]
    assert malformed == ["this line is not JSON", '{"type": "assistant", "mess']


async def test_api_error_after_one_tool_call_fails_the_run(settings: Settings, repo: Path) -> None:
    with scripted(settings, "api-error") as (configured, _):
        outcome, entries = await run_to_end(configured, RunSpec(prompt="go", repo=repo, allow=("Bash(echo:*)",)))
    assert outcome.status == "failed" and outcome.code == "agent_error"
    assert_log_whole(entries)
    final = entries[-1]["payload"]["params"]
    assert final["status"] == "failed" and final["code"] == "agent_error"
