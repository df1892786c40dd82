"""A real subprocess agent under one native setting, driven by a recording ACP client.

``run_native(entry, setting, scenario, workspace, home)`` writes the run's agent home exactly as
baton does (the entry's ``launch``), spawns the agent with baton's spawning code, opens the
session the way the executor does (the command's ``_meta`` and mode), and answers every
permission request by kind (approve or reject, as asked). It records each request and each
tool call, so a test can tell which calls reached the client (and so baton's Gatekeeper) and
which ran unasked. ``matrix_scenario`` builds the mode-matrix turn the agents' tests share.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from acp.schema import AllowedOutcome, ClientCapabilities, FileSystemCapabilities, RequestPermissionResponse

from baton.acp.host import choose_option
from baton.agents.registry import AgentEntry
from baton.agents.subprocess import LaunchContext, SubprocessAgent
from baton.testing import RecordedRequest, Scenario, ScriptedModelServer

KEY = "sk-native-key-0123456789abcdef"
COMMANDS = ["echo hi", "cat README.md", "ls", "git status", "touch made.txt"]


@dataclass
class Recording:
    """What the client saw: permission requests (the tool call as sent) and tool calls; what the model got."""

    approve: bool = True
    requests: list[dict[str, Any]] = field(default_factory=list)
    options: list[list[tuple[str, str]]] = field(default_factory=list)
    tool_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    stop_reason: str | None = None
    model_requests: list[RecordedRequest] = field(default_factory=list)

    def asked_commands(self) -> list[str | None]:
        """Codex: the command line of each request (argv after ``bash -lc``), None for a patch."""
        return [
            " ".join(r["rawInput"]["command"][2:]) if "command" in r.get("rawInput", {}) else None
            for r in self.requests
        ]

    def ran_commands(self) -> list[str]:
        """Codex: the command line of each tool call that ran."""
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
    entry: AgentEntry,
    setting: object,
    scenario: Scenario | str,
    workspace: Path,
    home: Path,
    *,
    approve: bool = True,
    max_retries: int | None = 0,
    before_prompt: Callable[[Any, Any], Awaitable[None]] | None = None,
) -> Recording:
    """One turn ("go") of ``entry`` under ``setting``; ``before_prompt(conn, session)`` runs after the session opens."""
    recording = Recording(approve=approve)
    executable = entry.executable()
    assert executable is not None, f"{entry.package} is not installed: run `make setup`"
    assert entry.launch is not None
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
            max_retries=max_retries,
        )
        agent = SubprocessAgent(entry.name, entry.launch(context, executable))
        command = agent.command
        try:
            conn = connect_to_agent(RecordingClient(recording), await agent.start())  # type: ignore[arg-type]
            capabilities = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=False, write_text_file=False))
            await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities)
            session = await conn.new_session(cwd=str(workspace), mcp_servers=[], **dict(command.session_meta or {}))
            if command.session_mode is not None:
                await conn.set_session_mode(session_id=session.session_id, mode_id=command.session_mode)
            if before_prompt is not None:
                await before_prompt(conn, session)
            response = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]), 60)
            recording.stop_reason = str(response.stop_reason)
            with contextlib.suppress(Exception):
                await conn.close()
        finally:
            await agent.aclose()
        recording.model_requests = list(server.requests)
    return recording


# -- the mode-matrix turn ----------------------------------------------------------------------


def bash(command: str, **extra: str) -> dict[str, Any]:
    return {"tools": [{"name": "Bash", "input": {"command": command, **extra}}]}


READ = {"tools": [{"name": "Read", "input": {"file_path": "{cwd}/README.md"}}]}
GLOB = {"tools": [{"name": "Glob", "input": {"pattern": "*.md"}}]}
GREP_OUTSIDE = {
    "tools": [{"name": "Grep", "input": {"pattern": "root", "path": "/etc/passwd", "output_mode": "count"}}]
}
WRITES = (
    {"tools": [{"name": "Write", "input": {"file_path": "{cwd}/new.txt", "content": "new\n"}}]},
    {"tools": [{"name": "Write", "input": {"file_path": "{cwd}/.claude/settings.json", "content": "{}\n"}}]},
)
EDIT = {
    "tools": [
        {
            "name": "Edit",
            "input": {"file_path": "{cwd}/README.md", "old_string": "# a repository", "new_string": "# b repository"},
        }
    ]
}


def matrix_scenario(*after: dict[str, Any], **bash_extra: str) -> Scenario:
    """The commands of ``COMMANDS`` (each a Bash call with ``bash_extra`` in its input), then ``after``."""
    steps = [*(bash(command, **bash_extra) for command in COMMANDS), *after]
    return Scenario.from_dict({"steps": steps, "final_text": "All done."}, name="matrix")
