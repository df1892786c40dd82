"""Fixtures for the MCP tests: the test MCP server (``mcp_test_server.py``) configured as ``t``
with its secret, and the ACP agent that calls MCP tools (``mcp_acp_agent.py``) registered."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from tests.mcp.mcp_acp_agent import TOKEN

from baton.agents.registry import AGENTS, AgentEntry, NativeSetting, codex_bound_input, codex_tool_calls
from baton.agents.subprocess import AgentCommand, LaunchContext
from baton.config import McpServerConfig, Settings

SERVER = Path(__file__).with_name("mcp_test_server.py")
AGENT = Path(__file__).with_name("mcp_acp_agent.py")


def mcp_test_config(name: str = "t", *, timeout_seconds: float = 60.0) -> McpServerConfig:
    """The test MCP server as baton's configuration names it, its token in its own environment."""
    return McpServerConfig(
        name=name,
        command=(sys.executable, str(SERVER)),
        env={"MCP_TEST_TOKEN": TOKEN},
        timeout_seconds=timeout_seconds,
        source="config",
    )


def mcp_agent_entry(*args: str) -> AgentEntry:
    def launch(context: LaunchContext, executable: Path) -> AgentCommand:
        env = {"PATH": os.environ.get("PATH", "")}
        return AgentCommand((str(executable), str(AGENT), *args), env, context.workspace, context.run_id)

    return AgentEntry(
        name="mcp-script" + ("-" + "-".join(args) if args else ""),
        package="baton-test-mcp-agent",
        version="0",
        command=(sys.executable,),
        env_recipe="PATH",
        config_recipe="none",
        tool_names={},
        bound_input=codex_bound_input,
        settings=(NativeSetting("asks", "asks for everything", "every call", (), "tests/mcp"),),
        tool_calls=codex_tool_calls,
        launch=launch,
    )


@pytest.fixture
def mcp_agent(monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """Register the MCP-calling agent (``nohttp``: one that offers no HTTP MCP); its name."""

    def register(*args: str) -> str:
        entry = mcp_agent_entry(*args)
        monkeypatch.setitem(AGENTS, entry.name, entry)
        return entry.name

    return register


@pytest.fixture
def mcp_settings(settings: Settings) -> Settings:
    """Settings whose configuration names the test server ``t`` (and ``slow``: 1 s to answer)."""
    return replace(
        settings,
        mcp_servers=(mcp_test_config(), mcp_test_config("slow", timeout_seconds=1.0)),
        openai_api_key="sk-scripted-openai-key-0123456789abcdef",
        agent_start_timeout_seconds=20.0,
        gate_grace_seconds=30.0,
    )
