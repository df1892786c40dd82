"""The real codex-acp under one native setting, driven by a recording ACP client.

``run_native(setting, scenario, workspace)`` writes the run's ``CODEX_HOME`` exactly as baton
does, spawns codex-acp with baton's spawning code, and answers every permission request by
kind (approve or reject, as asked). It records each request and each tool call, so a test can
tell which calls reached the client (and so baton's Gatekeeper) and which ran unasked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from acp.schema import AllowedOutcome, ClientCapabilities, FileSystemCapabilities, RequestPermissionResponse

from baton.acp.host import choose_option
from baton.agents.codex import CodexSetting, codex_command
from baton.agents.registry import CODEX
from baton.agents.subprocess import LaunchContext, SubprocessAgent
from baton.testing import Scenario, ScriptedModelServer

KEY = "sk-native-codex-key-0123456789abcdef"


@dataclass
class Recording:
    """What the client saw: permission requests (the tool call as sent) and tool calls."""

    approve: bool = True
    requests: list[dict[str, Any]] = field(default_factory=list)
    options: list[list[tuple[str, str]]] = field(default_factory=list)
    tool_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    stop_reason: str | None = None

    def asked_commands(self) -> list[str | None]:
        return [
            " ".join(r["rawInput"]["command"][2:]) if "command" in r.get("rawInput", {}) else None
            for r in self.requests
        ]

    def ran_commands(self) -> list[str]:
        commands = []
        for call in self.tool_calls.values():
            command = (call.get("rawInput") or {}).get("command")
            if isinstance(command, list):
                commands.append(command[-1])
        return commands


class RecordingClient:
    def __init__(self, recording: Recording) -> None:
        self.recording = recording

    async def request_permission(self, options: Any, session_id: str, tool_call: Any, **_: Any) -> Any:
        self.recording.requests.append(tool_call.model_dump(by_alias=True, exclude_none=True))
        self.recording.options.append([(option.option_id, str(option.kind)) for option in options])
        option_id = choose_option(options, self.recording.approve)
        assert option_id is not None
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option_id))

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        data = update.model_dump(by_alias=True, exclude_none=True)
        if data.get("sessionUpdate") == "tool_call":
            self.recording.tool_calls[data["toolCallId"]] = data

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


async def run_native(
    setting: CodexSetting, scenario: Scenario | str, workspace: Path, home: Path, *, approve: bool = True
) -> Recording:
    recording = Recording(approve=approve)
    executable = CODEX.executable()
    assert executable is not None, "codex-acp is not installed: run `make setup`"
    with ScriptedModelServer(scenario) as server:
        context = LaunchContext(
            run_id="native-" + os.urandom(4).hex(),
            workspace=workspace,
            agent_home=home,
            model=None,
            base_url=server.base_url,
            api_key=KEY,
            passthrough=(),
            parent=dict(os.environ),
            setting=setting,
            max_retries=0,
        )
        agent = SubprocessAgent("codex", codex_command(context, executable))
        try:
            conn = connect_to_agent(RecordingClient(recording), await agent.start())  # type: ignore[arg-type]
            capabilities = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=False, write_text_file=False))
            await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            response = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]), 60)
            recording.stop_reason = str(response.stop_reason)
            with contextlib.suppress(Exception):
                await conn.close()
        finally:
            await agent.aclose()
    return recording


async def prompt_after(workspace: Path, home: Path, scenario: str, before_prompt: Any) -> list[Any]:
    """One ``ask-all`` turn; ``before_prompt(conn, session)`` runs after ``session/new``.

    Returns the scripted server's recorded requests.
    """
    executable = CODEX.executable()
    assert executable is not None, "codex-acp is not installed: run `make setup`"
    setting = next(s for s in CODEX.settings if s.name == "ask-all").config
    with ScriptedModelServer(scenario) as server:
        context = LaunchContext(
            "native-" + os.urandom(4).hex(),
            workspace,
            home,
            None,
            server.base_url,
            KEY,
            (),
            dict(os.environ),
            setting,
            0,
        )
        agent = SubprocessAgent("codex", codex_command(context, executable))
        try:
            conn = connect_to_agent(RecordingClient(Recording()), await agent.start())  # type: ignore[arg-type]
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[])
            await before_prompt(conn, session)
            await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]), 60)
            with contextlib.suppress(Exception):
                await conn.close()
        finally:
            await agent.aclose()
        return server.requests
