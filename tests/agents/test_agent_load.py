"""Resuming an ACP agent that offers ``session/load`` but not ``session/resume``.

The agent is ``acp_script_agent.py load`` (its sessions kept under ``$HOME``). A first run asks
one turn (``echo 1``, cost 1 cent); a run continuing it (``plan_resume``: the native path with
an :class:`~baton.acp.replay.AgentRestore`) loads the agent's session, which replays the first
turn before the new one: the replayed updates are logged tagged ``_meta.baton.replay`` and
yield no runner event, no snapshot, no usage and nothing in the rebuilt conversation. When the
agent has lost the session, the run falls back to a new session with the rebuilt conversation.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from tests.agents.conftest import SCRIPT

from baton.agents.command import COMMAND_AGENT
from baton.config import Settings
from baton.events.entry import LogEntry
from baton.events.project import project
from baton.runs import Baton, RunSpec
from baton.runs.resume import load_conversation

pytestmark = pytest.mark.timeout(60)

ARGV = (sys.executable, str(SCRIPT), "load")


def _replayed(entry: LogEntry) -> bool:
    update = (entry["payload"].get("params") or {}).get("update") or {}
    return bool(update.get("_meta", {}).get("baton", {}).get("replay"))


def _first_turn(repo: Path) -> RunSpec:
    """The script agent's first run: one ``echo 1`` under acceptEdits with Bash allowed."""
    return RunSpec(
        prompt="first",
        repo=repo,
        agent=COMMAND_AGENT,
        agent_command=ARGV,
        trust_agent_permissions=True,
        permission_mode="acceptEdits",
        allow=("Bash",),
    )


def _commands(entries: list[LogEntry]) -> list[str]:
    return [e["data"]["command"] for e in project(entries) if e["type"] == "command.finished"]


async def test_a_load_only_agent_is_resumed_with_its_replay_tagged(
    settings: Settings, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))  # where the script agent keeps its sessions
    spec = _first_turn(repo)
    async with Baton(settings) as baton:
        first = await (await baton.start(spec)).wait()
        assert first.status == "finished" and first.total_cost_usd == 0.01
        first_entries = await baton.log.read(first.run_id)
        assert _commands(first_entries) == ["echo 1"]

        # Baton.resume starts the command the run recorded (no registry entry knows it).
        handle = await baton.resume(first.run_id, "second")
        plan = handle.resume_plan
        assert plan is not None and plan.params["path"] == "native" and plan.restore is not None
        assert plan.restore.fallback["path"] == "rebuilt" and "turn 1: first" in plan.restore.fallback_prompt
        assert plan.spec.prompt == "second" and plan.spec.agent_command == ARGV
        second = await handle.wait()
        assert second.status == "finished", second
        entries = await baton.log.read(second.run_id)
        record = await baton.store.get_run(second.run_id)
        conversation = await load_conversation(baton.store, baton.log, second.run_id)

    methods = [e["method"] for e in entries if e["direction"] == "to_agent"]
    assert "session/load" in methods and "session/new" not in methods
    replayed = [e for e in entries if _replayed(e)]
    # The first turn's five updates (its prompt, the call, its completion, the text, the usage).
    assert [e["payload"]["params"]["update"]["sessionUpdate"] for e in replayed] == [
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
        "usage_update",
    ]
    [answer] = [e for e in entries if e["direction"] == "from_agent" and e["method"] == "session/load"]
    assert max(e["seq"] for e in replayed) < answer["seq"]
    # Runner events: only the new turn's command and text; one turn, its own cost.
    events = project(entries)
    assert _commands(entries) == ["echo 2"]
    messages = [(e["data"]["role"], e["data"]["text"]) for e in events if e["type"] == "message"]
    assert messages == [("user", "second"), ("agent", "turn 2: second")]
    [turn] = [e for e in events if e["type"] == "turn.finished"]
    assert turn["data"]["total_cost_usd"] == 0.02
    assert record.total_cost_usd == 0.02 and second.total_cost_usd == 0.02
    assert not [e for e in events if e["type"] == "snapshot.captured" and e["log_seq"] <= answer["seq"]]
    # The rebuilt conversation holds each turn once.
    items: list[dict[str, Any]] = conversation.view()
    texts = [(item["type"], item.get("text")) for item in items if item["type"] in ("user", "agent")]
    assert texts == [("user", "first"), ("agent", "turn 1: first"), ("user", "second"), ("agent", "turn 2: second")]


async def test_a_lost_agent_session_falls_back_to_the_rebuilt_conversation(
    settings: Settings, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))  # where the script agent keeps its sessions
    spec = _first_turn(repo)
    async with Baton(settings) as baton:
        first = await (await baton.start(spec)).wait()
        # Its HOME: the user's, or in the filesystem sandbox the run's agent home (docs/sandbox.md).
        homes = [settings.run_dir(first.run_id) / "agent-home", tmp_path / "user-home"]
        (kept_dir,) = [home / ".acp-script-agent" for home in homes if (home / ".acp-script-agent").is_dir()]
        for kept in kept_dir.iterdir():
            kept.unlink()  # the agent forgot every session
        second = await (await baton.resume(first.run_id, "again")).wait()
        entries = await baton.log.read(second.run_id)
        conversation = await load_conversation(baton.store, baton.log, second.run_id)
    assert second.status == "finished", second
    resumes = [e["payload"]["params"] for e in entries if e["method"] == "_baton/resume"]
    assert [r["path"] for r in resumes] == ["native", "rebuilt"]
    methods = [e["method"] for e in entries if e["direction"] == "to_agent"]
    assert methods.index("session/load") < methods.index("session/new")
    [prompt] = [
        e["payload"]["params"] for e in entries if e["method"] == "session/prompt" and e["direction"] == "to_agent"
    ]
    assert "turn 1: first" in prompt["prompt"][0]["text"] and "again" in prompt["prompt"][0]["text"]
    assert not [e for e in entries if _replayed(e)]
    # The conversation keeps what the user asked, not the transcript sent in its place.
    users = [item.get("text") for item in conversation.view() if item["type"] == "user"]
    assert users == ["first", "again"]
