"""MCP servers with the real Claude Code (scripted model, ``mcp-claude.yaml``): Claude calls the
test server's tools through baton's proxy (handed through the SDK's ``mcp_servers``); its hook
leaves the decision to the proxy, which allows, denies, or gates the call; the token the server
answers with reaches the log redacted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.mcp.mcp_acp_agent import TOKEN
from tests.runs.test_gates_claude import decide, next_gate, scripted

from baton.config import Settings
from baton.events.entry import LogEntry
from baton.events.project import project
from baton.runs import Baton, RunSpec

pytestmark = [pytest.mark.claude, pytest.mark.timeout(180)]

SCENARIO = str(Path(__file__).with_name("mcp-claude.yaml"))


def finished(entries: list[LogEntry]) -> list[dict[str, object]]:
    return [e["data"] for e in project(entries) if e["type"] == "mcp.finished"]


def result(entries: list[LogEntry]) -> str:
    [status] = [e for e in project(entries) if e["type"] == "task.finished"]
    return str(status["data"].get("result"))


async def test_claude_calls_an_allowed_tool_and_a_denied_one(mcp_settings: Settings, repo: Path) -> None:
    with scripted(mcp_settings, SCENARIO) as (configured, _):
        spec = RunSpec(prompt="go", repo=repo, mcp=("t",), allow=("mcp__t__echo",), deny=("mcp__t__tok*",))
        async with Baton(configured) as baton:
            outcome = await baton.run(spec)
            entries = await baton.log.read(outcome.run_id)
    assert outcome.status == "finished", outcome
    echo, token = finished(entries)
    assert (echo["tool"], echo["output"], echo["is_error"]) == ("echo", "echo: from claude", False)
    assert echo["denied"] is False
    assert echo["input"] == {"text": "from claude"} and echo["reason"] == "rule:mcp__t__echo"
    assert token["denied"] is True and token["reason"] == "rule:mcp__t__tok*"
    assert "echo: from claude" in json.dumps([e["payload"] for e in entries if e["method"] == "session/update"])
    # Claude's own permission request for each call was left to the proxy (not asked twice).
    reasons = [
        e["payload"]["result"]["_meta"]["baton"]["reason"]
        for e in entries
        if e["method"] == "session/request_permission" and e["direction"] == "to_agent"
    ]
    assert reasons == ["mcp_proxy", "mcp_proxy"]
    assert "denied" in result(entries) or "mcp__t__token" in result(entries)


async def test_claude_waits_for_a_gate_and_the_token_reaches_the_log_redacted(
    mcp_settings: Settings, repo: Path
) -> None:
    with scripted(mcp_settings, SCENARIO) as (configured, _):
        spec = RunSpec(prompt="go", repo=repo, mcp=("t",), allow=("mcp__t__echo",))
        async with Baton(configured) as baton:
            handle = await baton.start(spec)
            gate = await next_gate(baton.store, handle.run_id, within=90)
            assert gate.tool_name == "mcp__t__token" and gate.input == {}
            await decide(baton.store, gate, decision="approve")
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished", outcome
    echo, token = finished(entries)
    assert echo["output"] == "echo: from claude"
    assert token["output"] == "token=[REDACTED]" and token["reason"] == "human" and token["denied"] is False
    assert "token=[REDACTED]" in result(entries)  # what Claude was answered, as the log keeps it
    assert TOKEN not in json.dumps([e["payload"] for e in entries])
