"""MCP servers with the other pinned agents (codex-acp, Gemini CLI, OpenCode, claude-agent-acp,
Kilo Code),
the real programs against the scripted model server (``mcp-agents.yaml``, each tool named as the
request offers it): each offers ``mcpCapabilities.http``, calls the test server through baton's
proxy, which allows ``echo`` and denies ``token``; each also asks its own permission for every MCP
call, and that request is recognised (the registry's ``mcp_call``) and answered allow with reason
``mcp_proxy``: the call is decided once, by the proxy."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from tests.agents.conftest import GEMINI_KEY, decisions, run_to_end, scripted_openai
from tests.mcp.mcp_acp_agent import TOKEN

from baton.agents.registry import AGENTS
from baton.config import Settings
from baton.events.project import project
from baton.runs import RunSpec

pytestmark = pytest.mark.timeout(150)

SCENARIO = str(Path(__file__).with_name("mcp-agents.yaml"))
ANTHROPIC_KEY = "sk-scripted-anthropic-key-0123456789abcdef"


# Qwen Code is left out here (its recogniser is tested below): against the real program the run
# missed its first MCP call 1 time in 3 under load, cause not found yet (docs/agents.md).
@pytest.mark.parametrize("agent", ["codex", "gemini", "opencode", "claude-acp", "kilo"])
async def test_the_agent_calls_an_allowed_tool_and_a_denied_one_decided_once_by_the_proxy(
    mcp_settings: Settings, repo: Path, monkeypatch: pytest.MonkeyPatch, agent: str
) -> None:
    with scripted_openai(mcp_settings, SCENARIO) as (configured, server):
        configured = replace(configured, anthropic_base_url=server.base_url, anthropic_api_key=ANTHROPIC_KEY)
        if agent == "gemini":  # Gemini's credentials come from the environment only
            monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)
            monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
        # Gemini CLI runs some commands unasked: enforceable under default only with Bash allowed.
        allow = ("mcp__t__echo", "Bash") if agent == "gemini" else ("mcp__t__echo",)
        spec = RunSpec(
            prompt="go", repo=repo, agent=agent, mcp=("t",), sandbox="none", allow=allow, deny=("mcp__t__tok*",)
        )
        done = await run_to_end(configured, spec)
    assert done.outcome.status == "finished", done.outcome
    [initialized] = [
        e["payload"]["result"] for e in done.entries if e["method"] == "initialize" and "result" in e["payload"]
    ]
    assert initialized["agentCapabilities"]["mcpCapabilities"]["http"] is True
    finished = [e["data"] for e in project(done.entries) if e["type"] == "mcp.finished"]
    assert [(f["tool"], f["denied"], f["is_error"], f["reason"]) for f in finished] == [
        ("echo", False, False, "rule:mcp__t__echo"),
        ("token", True, True, "rule:mcp__t__tok*"),
    ]
    assert finished[0]["output"] == "echo: from the agent" and finished[0]["input"] == {"text": "from the agent"}
    # The agent's own request for each call: allowed for the proxy to decide, no gate opened.
    assert decisions(done.entries) == [
        ("allow", "mcp_proxy", "mcp__t__echo"),
        ("allow", "mcp_proxy", "mcp__t__token"),
    ]
    assert not [e for e in project(done.entries) if e["type"].startswith("gate.")]
    assert TOKEN not in json.dumps([e["payload"] for e in done.entries])


SERVERS = frozenset({"t", "t_x"})


@pytest.mark.parametrize(
    ("agent", "described", "found"),
    [
        (
            "codex",
            {
                "rawInput": {
                    "server_name": "t",
                    "request": {
                        "message": 'Allow the t MCP server to run tool "echo"?',
                        "_meta": {"codex_approval_kind": "mcp_tool_call"},
                    },
                }
            },
            ("t", "echo"),
        ),
        (  # a server the run was not given: Codex's own configuration, not baton's proxy
            "codex",
            {
                "rawInput": {
                    "server_name": "other",
                    "request": {
                        "message": 'Allow the other MCP server to run tool "echo"?',
                        "_meta": {"codex_approval_kind": "mcp_tool_call"},
                    },
                }
            },
            None,
        ),
        ("codex", {"rawInput": {"command": ["echo", "hi"]}}, None),
        ("gemini", {"kind": "other", "title": "echo (t MCP Server)", "toolCallId": "mcp_t_echo__1"}, ("t", "echo")),
        ("gemini", {"kind": "other", "title": "echo (t MCP Server)", "toolCallId": "run_shell_command-1"}, None),
        ("gemini", {"kind": "execute", "title": "echo (t MCP Server)", "toolCallId": "mcp_t_echo__1"}, None),
        ("opencode", {"kind": "other", "title": "t_x_echo"}, ("t_x", "echo")),  # the longest server name
        ("opencode", {"kind": "other", "title": "t_echo"}, ("t", "echo")),
        ("opencode", {"kind": "other", "title": "webfetch"}, None),
        ("opencode", {"kind": "execute", "title": "t_echo"}, None),
        ("qwen", {"kind": "other", "title": '{"text":"hi"}', "_meta": {"toolName": "mcp__t__echo"}}, ("t", "echo")),
        ("qwen", {"kind": "other", "title": "{}", "_meta": {"toolName": "mcp__u__echo"}}, None),
        ("qwen", {"kind": "execute", "title": "echo", "_meta": {"toolName": "mcp__t__echo"}}, None),
        ("qwen", {"kind": "other", "title": "mcp__t__echo"}, None),
        ("kilo", {"kind": "other", "title": "t_x_echo"}, ("t_x", "echo")),
        ("kilo", {"kind": "other", "title": "webfetch"}, None),
        ("kilo", {"kind": "execute", "title": "t_echo"}, None),
        ("claude-acp", {"kind": "other", "title": "mcp__t__echo"}, ("t", "echo")),
        ("claude-acp", {"kind": "other", "title": "mcp__u__echo"}, None),
        ("claude-acp", {"kind": "execute", "title": "Bash"}, None),
    ],
)
def test_only_a_request_for_a_tool_of_a_server_the_run_handed_is_left_to_the_proxy(
    agent: str, described: dict[str, object], found: tuple[str, str] | None
) -> None:
    mcp_call = AGENTS[agent].mcp_call
    assert mcp_call is not None
    assert mcp_call(described, SERVERS) == found
