"""Resuming a claude-acp run: claude-agent-acp 0.23.1 offers ``session/resume`` (and
``session/load``), so the run continuing it resumes the agent's own session — nothing is
replayed, no conversation is rebuilt — and the model sees the first turn again. The cost
claude-agent-acp reports (``usage_update.cost``) is the run's ``total_cost_usd``. With its
``resume`` capability hidden, the same continuation goes through ``session/load``: the agent's
real replay is logged tagged and yields no event, no snapshot and no conversation item.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from baton.acp.replay import restore_session
from baton.acp_server._history import is_replayed
from baton.config import Settings
from baton.events.project import project
from baton.runs import Baton, RunSpec, executor
from baton.runs.resume import load_conversation
from baton.testing import ScriptedModelServer

pytestmark = [pytest.mark.timeout(90), pytest.mark.claude, pytest.mark.slow]

KEY = "sk-scripted-anthropic-key-0123456789abcdef"


async def test_a_claude_acp_run_continues_through_session_resume(settings: Settings, repo: Path) -> None:
    spec = RunSpec(prompt="go", repo=repo, agent="claude-acp", permission_mode="acceptEdits", allow=("Bash",))
    with ScriptedModelServer("write-and-run") as server:
        configured = replace(settings, anthropic_base_url=server.base_url, anthropic_api_key=KEY)
        async with Baton(configured) as baton:
            first = await baton.run(spec)
            handle = await baton.resume(first.run_id, "[scenario:plain] again")
            second = await handle.wait()
            entries = await baton.log.read(second.run_id)
            records = [await baton.store.get_run(run_id) for run_id in (first.run_id, second.run_id)]
        last_request = server.requests[-1].body
    assert first.status == second.status == "finished", (first, second)
    assert handle.resume_plan is not None and handle.resume_plan.restore is not None
    methods = [e["method"] for e in entries if e["direction"] == "to_agent"]
    assert "session/resume" in methods and "session/new" not in methods and "session/load" not in methods
    [resumed] = [e["payload"]["params"] for e in entries if e["method"] == "_baton/resume"]
    assert resumed["path"] == "native"
    [prompt] = [
        e["payload"]["params"] for e in entries if e["method"] == "session/prompt" and e["direction"] == "to_agent"
    ]
    assert prompt["prompt"][0]["text"] == "[scenario:plain] again"  # not a rebuilt transcript
    # The agent restored its conversation: the model gets the first turn's command back.
    assert "echo hi" in json.dumps(last_request["messages"])
    events = project(entries)
    assert not [e for e in events if e["type"].startswith(("command.", "file."))]
    # claude-agent-acp's cost (usage_update.cost.amount) is the turn's and the run's cost.
    costs = [e["data"]["total_cost_usd"] for e in events if e["type"] == "turn.finished"]
    assert len(costs) == 1 and costs[0] is not None and costs[0] > 0
    assert records[0].total_cost_usd is not None and records[0].total_cost_usd > 0
    assert records[1].total_cost_usd == costs[0] and records[1].resumed_from == first.run_id


async def test_a_claude_acp_run_continues_through_session_load_when_resume_is_not_offered(
    settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """claude-agent-acp with its ``resume`` capability hidden from baton is a load-only agent: the
    real replay of the first turn is logged tagged and counted nowhere."""

    async def load_only(conn: Any, capabilities: Any, *args: Any) -> Any:
        hidden = capabilities.model_copy(update={"session_capabilities": None})
        return await restore_session(conn, hidden, *args)

    monkeypatch.setattr(executor, "restore_session", load_only)
    spec = RunSpec(prompt="go", repo=repo, agent="claude-acp", permission_mode="acceptEdits", allow=("Bash",))
    with ScriptedModelServer("write-and-run") as server:
        configured = replace(settings, anthropic_base_url=server.base_url, anthropic_api_key=KEY)
        async with Baton(configured) as baton:
            first = await baton.run(spec)
            second = await (await baton.resume(first.run_id, "[scenario:plain] again")).wait()
            entries = await baton.log.read(second.run_id)
            conversation = await load_conversation(baton.store, baton.log, second.run_id)
    assert first.status == second.status == "finished", (first, second)
    methods = [e["method"] for e in entries if e["direction"] == "to_agent"]
    assert "session/load" in methods and "session/resume" not in methods and "session/new" not in methods
    replayed = [e for e in entries if is_replayed((e["payload"].get("params") or {}).get("update") or {})]
    assert {"tool_call", "agent_message_chunk"} <= {e["payload"]["params"]["update"]["sessionUpdate"] for e in replayed}
    events = project(entries)
    assert not [e for e in events if e["type"].startswith(("command.", "file.", "snapshot."))]
    assert [e["type"] for e in events].count("turn.finished") == 1
    users = [item.get("text") for item in conversation.view() if item["type"] == "user"]
    assert users == ["go", "[scenario:plain] again"]
