"""MCP servers in real runs of a subprocess ACP agent (``mcp_acp_agent.py``) that calls the test
MCP server through baton's proxy: allowed, denied, gated then approved, its secret absent from the
log and from the agent's environment; a server that crashes mid-call and one that never answers
(an error result each, the run goes on); an agent that takes no HTTP MCP server is refused."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.agents.conftest import run_to_end
from tests.mcp.mcp_acp_agent import TOKEN
from tests.runs.test_gates_claude import decide, next_gate

from baton.config import Settings
from baton.events.entry import LogEntry
from baton.events.project import project
from baton.runs import Baton, RunSpec

pytestmark = pytest.mark.timeout(120)


def said(entries: list[LogEntry]) -> list[str]:
    return [e["data"]["text"] for e in project(entries) if e["type"] == "message" and e["data"]["role"] == "agent"]


def mcp_events(entries: list[LogEntry]) -> list[tuple[str, dict[str, Any]]]:
    return [(e["type"], e["data"]) for e in project(entries) if e["type"].startswith("mcp.")]


async def test_allowed_and_denied_calls_and_the_secret_stays_out(
    mcp_settings: Settings, repo: Path, mcp_agent: Callable[..., str]
) -> None:
    prompt = "\n".join(
        ["servers", 'call t echo {"text": "hi"}', "call t token {}", "call t agent_env {}", "env", "call t crash {}"]
    )
    spec = RunSpec(
        prompt=prompt,
        repo=repo,
        agent=mcp_agent(),
        mcp=("t",),
        sandbox="none",
        allow=("mcp__t__echo", "mcp__t__token", "mcp__t__agent_*"),
        deny=("mcp__t__cr*",),
    )
    done = await run_to_end(mcp_settings, spec)
    assert done.outcome.status == "finished", done.outcome
    lines = said(done.entries)
    assert re.fullmatch(r"servers: t http http://127\.0\.0\.1:\d+/t/mcp", lines[0]), lines[0]
    assert lines[1:] == [
        "t.echo error=false: echo: hi",
        "t.token error=false: token=[REDACTED]",
        "t.agent_env error=false: none",  # the server's environment is its own
        "env: none",  # the agent's holds neither the token nor its variable
        "t.crash error=true: mcp__t__crash is denied by the rule mcp__t__cr*.",
    ]
    text = json.dumps([entry["payload"] for entry in done.entries])
    assert TOKEN not in text
    events = mcp_events(done.entries)
    assert [kind for kind, _ in events] == ["mcp.called", "mcp.finished"] * 4
    called, finished = events[0][1], events[1][1]
    assert called == {"server": "t", "tool": "echo", "tool_call_id": called["tool_call_id"], "input": {"text": "hi"}}
    assert finished["output"] == "echo: hi" and finished["is_error"] is False and finished["denied"] is False
    assert finished["reason"] == "rule:mcp__t__echo" and finished["tool_call_id"] == called["tool_call_id"]
    denied = events[-1][1]
    assert denied["denied"] is True and denied["is_error"] is True and denied["reason"] == "rule:mcp__t__cr*"
    [servers] = [e["payload"]["params"] for e in done.entries if e["method"] == "_baton/mcp_servers"]
    assert servers["servers"][0]["env"] == ["MCP_TEST_TOKEN"]  # the name of its variable, never the value
    assert done.entries[0]["payload"]["params"]["mcp"] == ["t"]


async def test_a_call_the_policy_asks_about_opens_a_gate_bound_to_its_input(
    mcp_settings: Settings, repo: Path, mcp_agent: Callable[..., str]
) -> None:
    spec = RunSpec(prompt='call t echo {"text": "gated"}', repo=repo, agent=mcp_agent(), mcp=("t",))
    async with Baton(mcp_settings) as baton:
        handle = await baton.start(spec)
        gate = await next_gate(baton.store, handle.run_id, within=60)
        assert gate.kind == "tool" and gate.tool_name == "mcp__t__echo"
        assert gate.input == {"text": "gated"} and gate.bound_input_hash is not None
        await decide(baton.store, gate, decision="approve")
        outcome = await handle.wait()
        entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished", outcome
    assert said(entries) == ["t.echo error=false: echo: gated"]
    types = [e["type"] for e in project(entries) if e["type"].startswith(("mcp.", "gate."))]
    assert types == ["mcp.called", "gate.opened", "gate.resolved", "mcp.finished"]
    finished = mcp_events(entries)[-1][1]
    assert finished["reason"] == "human" and finished["denied"] is False


async def test_a_gate_denied_is_an_error_result_and_the_call_is_not_made(
    mcp_settings: Settings, repo: Path, mcp_agent: Callable[..., str]
) -> None:
    spec = RunSpec(prompt="call t crash {}", repo=repo, agent=mcp_agent(), mcp=("t",))
    async with Baton(mcp_settings) as baton:
        handle = await baton.start(spec)
        gate = await next_gate(baton.store, handle.run_id, within=60)
        await decide(baton.store, gate, decision="deny", reason="not now")
        outcome = await handle.wait()
        entries = await baton.log.read(handle.run_id)
    assert outcome.status == "finished", outcome
    [line] = said(entries)
    assert line.startswith("t.crash error=true: ") and "not now" in line
    assert mcp_events(entries)[-1][1]["denied"] is True


async def test_a_server_that_crashes_mid_call_or_never_answers_is_an_error_and_the_run_goes_on(
    mcp_settings: Settings, repo: Path, mcp_agent: Callable[..., str]
) -> None:
    prompt = "\n".join(
        ["call slow hang {}", 'call slow echo {"text": "still here"}', "call t crash {}", 'call t echo {"text": "x"}']
    )
    spec = RunSpec(prompt=prompt, repo=repo, agent=mcp_agent(), mcp=("t", "slow"), allow=("mcp__t", "mcp__slow__*"))
    done = await run_to_end(mcp_settings, spec)
    assert done.outcome.status == "finished", done.outcome
    lines = said(done.entries)
    assert lines[0] == "slow.hang error=true: the MCP server slow did not answer in 1 s"
    assert lines[1] == "slow.echo error=false: echo: still here"
    assert lines[2].startswith("t.crash error=true: the MCP server t failed: ")
    assert lines[3].startswith("t.echo error=true: the MCP server t is not running")
    finished = [data for kind, data in mcp_events(done.entries) if kind == "mcp.finished"]
    assert [data["is_error"] for data in finished] == [True, False, True, True]


async def test_an_agent_that_takes_no_http_mcp_server_is_refused(
    mcp_settings: Settings, repo: Path, mcp_agent: Callable[..., str]
) -> None:
    spec = RunSpec(prompt="servers", repo=repo, agent=mcp_agent("nohttp"), mcp=("t",))
    done = await run_to_end(mcp_settings, spec)
    assert done.outcome.status == "failed" and done.outcome.code == "mcp_not_supported", done.outcome
    assert "mcpCapabilities.http" in (done.outcome.message or "")
    assert said(done.entries) == []  # never prompted


async def test_a_sandboxed_agent_reaches_the_endpoints_inside_its_network_namespace(
    mcp_settings: Settings, repo: Path, mcp_agent: Callable[..., str]
) -> None:
    prompt = 'servers\ncall t echo {"text": "from inside"}'
    spec = RunSpec(prompt=prompt, repo=repo, agent=mcp_agent(), mcp=("t",), sandbox="bwrap", allow=("mcp__t",))
    done = await run_to_end(mcp_settings, spec)
    assert done.outcome.status == "finished", done.outcome
    [sandbox] = [e["payload"]["params"] for e in done.entries if e["method"] == "_baton/sandbox"]
    assert sandbox["network"]["mode"] == "isolated"
    assert said(done.entries) == [
        "servers: t http http://127.0.0.1:17072/t/mcp",
        "t.echo error=false: echo: from inside",
    ]
