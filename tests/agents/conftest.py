"""Fixtures for subprocess agents: runs through ``Baton`` against the scripted model server.

``run_agent`` starts a run and returns its outcome, its log and its runner events.
``script_agent`` registers a registry entry for ``acp_script_agent.py`` (a tiny ACP agent in
plain Python) under a behaviour, so failure paths run through the real spawning code.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import make_git_repo
from tests.runs.test_gates_claude import decide, next_gate

from baton.agents.registry import AGENTS, AgentEntry, NativeSetting, codex_bound_input, codex_tool_calls
from baton.agents.subprocess import AgentCommand, LaunchContext
from baton.config import Settings
from baton.events.entry import LogEntry
from baton.events.project import RunnerEvent, project
from baton.runs import Baton, RunOutcome, RunSpec
from baton.testing import ScriptedModelServer

SCRIPT = Path(__file__).with_name("acp_script_agent.py")
OPENAI_KEY = "sk-scripted-openai-key-0123456789abcdef"
ANTHROPIC_KEY = "sk-scripted-anthropic-key-0123456789abcdef"
GEMINI_KEY = "scripted-gemini-key-0123456789abcdef"


@dataclass(frozen=True)
class Finished:
    outcome: RunOutcome
    entries: list[LogEntry]

    @property
    def events(self) -> list[RunnerEvent]:
        return project(self.entries)

    def types(self, *, snapshots: bool = True) -> list[str]:
        """The runner-event types; ``snapshots=False`` leaves out ``snapshot.captured`` (captured in the
        background after an edit: where it lands is timing, not the agent). Connections the
        sandbox refused (``message`` with ``tool: "network"``) are the agent program's own
        background traffic — OpenCode asks registry.npmjs.org at start — not the conversation."""
        return [
            event["type"]
            for event in self.events
            if (snapshots or event["type"] != "snapshot.captured") and event["data"].get("tool") != "network"
        ]

    def methods(self) -> list[str | None]:
        return [entry["method"] for entry in self.entries]


@contextmanager
def scripted_openai(settings: Settings, scenario: str) -> Iterator[tuple[Settings, ScriptedModelServer]]:
    with ScriptedModelServer(scenario) as server:
        configured = replace(settings, openai_base_url=server.base_url, openai_api_key=OPENAI_KEY, model_max_retries=0)
        yield configured, server


async def run_to_end(settings: Settings, spec: RunSpec) -> Finished:
    async with Baton(settings) as baton:
        outcome = await baton.run(spec)
        entries = await baton.log.read(outcome.run_id)
    return Finished(outcome, entries)


def _write_and_run(base: Path, agent: str, server: ScriptedModelServer) -> tuple[Settings, RunSpec]:
    """``write-and-run`` for ``agent`` (acceptEdits, Bash allowed) in a repository and home under ``base``."""
    repo = make_git_repo(base / "repo", {"README.md": "# r\n"})
    settings = Settings.load(
        {"BATON_WORKSPACE": "in-place", "BATON_HOME": str(base / "home"), "PATH": os.environ["PATH"]}
    )
    settings = replace(
        settings,
        anthropic_base_url=server.base_url,
        anthropic_api_key=ANTHROPIC_KEY,
        openai_base_url=server.base_url,
        openai_api_key=OPENAI_KEY,
    )
    return settings, RunSpec(prompt="go", repo=repo, agent=agent, permission_mode="acceptEdits", allow=("Bash",))


@pytest.fixture(scope="session")
def claude_write_and_run(tmp_path_factory: pytest.TempPathFactory) -> Finished:
    """Claude's run of ``write-and-run`` (acceptEdits, Bash allowed), the reference every other
    agent's run of it is compared with: one real run for the session, not one per agent."""
    base = tmp_path_factory.mktemp("claude-write-and-run")
    with pytest.MonkeyPatch.context() as patch, ScriptedModelServer("write-and-run") as server:
        patch.setenv("CLAUDE_CODE_MAX_RETRIES", "1")
        return asyncio.run(run_to_end(*_write_and_run(base, "claude", server)))


async def run_write_and_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent: str) -> Finished:
    """``write-and-run`` run by ``agent`` as ``claude_write_and_run`` was by Claude."""
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "1")
    with ScriptedModelServer("write-and-run") as server:
        if agent == "gemini":  # Gemini's credentials come from the environment only
            monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)
            monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
        return await run_to_end(*_write_and_run(tmp_path / agent, agent, server))


async def gated_run(
    settings: Settings, repo: Path, agent: str, decision: dict[str, Any]
) -> tuple[RunOutcome, list[LogEntry]]:
    """``needs-approval`` run by ``agent``: its one gate (Bash, with a bound input hash) decided with
    ``decision`` (``decide``'s body); the outcome and the log."""
    with ScriptedModelServer("needs-approval") as server:
        configured = replace(
            settings,
            openai_base_url=server.base_url,
            openai_api_key=OPENAI_KEY,
            anthropic_base_url=server.base_url,
            anthropic_api_key=ANTHROPIC_KEY,
            model_max_retries=0,
        )
        async with Baton(configured) as baton:
            handle = await baton.start(RunSpec(prompt="go", repo=repo, agent=agent))
            gate = await next_gate(baton.store, handle.run_id, within=60)
            assert gate.tool_name == "Bash" and gate.bound_input_hash is not None
            await decide(baton.store, gate, **decision)
            outcome = await handle.wait()
            return outcome, await baton.log.read(handle.run_id)


async def first_entry(entries: AsyncIterator[LogEntry], matches: Callable[[LogEntry], bool]) -> LogEntry:
    async for entry in entries:
        if matches(entry):
            return entry
    raise AssertionError("the log closed before the awaited entry")


def assert_log_whole(entries: list[LogEntry]) -> None:
    assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1))
    assert entries[0]["method"] == "_baton/run_started"
    assert entries[-1]["method"] == "_baton/status"
    assert entries[-1]["payload"]["params"]["status"] in ("finished", "failed", "cancelled")


def permission_answers(entries: list[LogEntry]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(request params, response result) of every permission request, in order."""
    asked: dict[Any, dict[str, Any]] = {}
    pairs = []
    for entry in entries:
        if entry["method"] != "session/request_permission":
            continue
        payload = entry["payload"]
        if entry["direction"] == "from_agent":
            asked[payload["id"]] = payload["params"]
        else:
            pairs.append((asked[payload["id"]], payload["result"]))
    return pairs


def decisions(entries: list[LogEntry]) -> list[tuple[str, str, str]]:
    """baton's answer to every permission request, in order: (decision, reason, tool name)."""
    answers = [result["_meta"]["baton"] for _, result in permission_answers(entries)]
    return [(answer["decision"], answer["reason"], answer["tool_name"]) for answer in answers]


def script_entry(behaviour: str, *args: str) -> AgentEntry:
    def launch(context: LaunchContext, executable: Path) -> AgentCommand:
        env = {"PATH": os.environ.get("PATH", "")}
        return AgentCommand((str(executable), str(SCRIPT), behaviour, *args), env, context.workspace, context.run_id)

    return AgentEntry(
        name=f"script-{behaviour}",
        package="baton-test-script-agent",
        version="0",
        command=(sys.executable,),
        env_recipe="PATH",
        config_recipe="none",
        tool_names={},
        bound_input=codex_bound_input,
        settings=(NativeSetting("asks", "asks for everything", "every call", (), "tests/agents"),),
        tool_calls=codex_tool_calls,
        launch=launch,
    )


@pytest.fixture
def script_agent(monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """Register the script agent with a behaviour; returns the agent name for ``RunSpec.agent``."""

    def register(behaviour: str, *args: str) -> str:
        entry = script_entry(behaviour, *args)
        monkeypatch.setitem(AGENTS, entry.name, entry)
        return entry.name

    return register


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The git repository of the mode-matrix turn (tests.agents.native)."""
    return make_git_repo(tmp_path / "work", {"README.md": "# a repository\n"})


@pytest.fixture
def openai_settings(settings: Settings) -> Settings:
    """Settings with an OpenAI key (script agents never call a model)."""
    return replace(settings, openai_api_key=OPENAI_KEY, agent_start_timeout_seconds=10.0)
