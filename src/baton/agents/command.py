"""Any other ACP agent, given as a command line (``baton run --agent-cmd "CMD ARGS"``).

baton knows nothing of what such an agent does without asking, so no baton mode is
enforceable on it: the registry entry built here has one native setting whose probes no
policy allows (a write under ``.baton/``, which always opens a gate), and the run is refused
with ``mode_not_enforceable``. ``--trust-agent-permissions`` swaps in a setting with no
probes: the user says the agent asks for what matters, and only what it asks is gated (baton
says so on stderr and in ``_baton/run_started``).

Its environment is the allow-list every subprocess agent gets (``PATH``, locale, ``TERM``, the
configured passthrough, ``BATON_RUN_ID``) plus the user's ``HOME`` (the agent's own
configuration lives there; in the filesystem sandbox, where the user's home is not there, the
run's agent home) and the model credentials baton knows (``ANTHROPIC_*``,
``OPENAI_*``, ``GEMINI_API_KEY``, ``GOOGLE_GEMINI_BASE_URL`` when set), which the log redacts.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from baton.agents.processes import RUN_ID_VARIABLE
from baton.agents.recipe import allowed_environment
from baton.agents.subprocess import AgentCommand, LaunchContext
from baton.errors import UsageError
from baton.gates import ToolCall

__all__ = [
    "COMMAND_AGENT",
    "CREDENTIAL_VARIABLES",
    "acp_bound_input",
    "acp_tool_calls",
    "command_launch",
    "parse_agent_command",
]

COMMAND_AGENT = "command"  # the agent name a run with --agent-cmd is recorded under
CREDENTIAL_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "GEMINI_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
)
_VOLATILE = frozenset({"toolCallId", "status", "_meta", "rawOutput"})


def parse_agent_command(command: str | Sequence[str]) -> tuple[str, ...]:
    """``"CMD ARGS"`` split as a shell would (no expansion), the program resolved on ``PATH``."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise UsageError("invalid_argument", "--agent-cmd is empty")
    program = shutil.which(argv[0])
    if program is None:
        raise UsageError("invalid_argument", f"--agent-cmd: {argv[0]!r} is not an executable on PATH")
    return (str(Path(program).resolve()) if "/" in argv[0] else program, *argv[1:])


def acp_bound_input(tool_call: dict[str, Any]) -> dict[str, Any]:
    """What a human sees of any ACP permission request: everything but the ids and status."""
    return {key: value for key, value in tool_call.items() if key not in _VOLATILE}


_PATH_KEYS = ("file_path", "filePath", "filepath", "path", "absolute_path")
_KIND_TOOLS = {"read": "Read", "search": "Grep", "edit": "Edit", "delete": "Edit", "move": "Edit", "fetch": "WebFetch"}


def acp_tool_calls(tool_call_id: str, kind: str | None, raw: dict[str, Any]) -> list[ToolCall]:
    """An ACP request as baton's calls, from its kind and input: a command is Bash, a file tool one
    call per path (``file_path``/``path`` in the input); anything else ``acp:<kind>``."""
    command = raw.get("command")
    if isinstance(command, str | list) and command:
        from baton.events.commands import command_string

        return [ToolCall("Bash", {"command": command_string(command)}, tool_call_id, kind)]
    tool = _KIND_TOOLS.get(kind or "")
    path = next((raw[key] for key in _PATH_KEYS if isinstance(raw.get(key), str)), None)
    if path is None:  # no input (OpenCode's read): the call's locations
        locations = [item.get("path") for item in raw.get("locations") or () if isinstance(item, dict)]
        path = next((location for location in locations if isinstance(location, str)), None)
    if tool is not None and isinstance(path, str):
        return [ToolCall(tool, {**raw, "file_path": path}, tool_call_id, kind)]
    return [ToolCall(f"acp:{kind or 'other'}", dict(raw), tool_call_id, kind)]


def command_environment(run_id: str, passthrough: tuple[str, ...], parent: Mapping[str, str]) -> dict[str, str]:
    env = allowed_environment(parent, passthrough, "HOME", *CREDENTIAL_VARIABLES)
    env[RUN_ID_VARIABLE] = run_id
    return env


def command_launch(argv: tuple[str, ...]) -> Any:
    """The registry ``launch`` recipe for ``argv``: the user's command, run as given."""

    def launch(context: LaunchContext, executable: Path) -> AgentCommand:
        env = command_environment(context.run_id, context.passthrough, context.parent)
        if context.sandboxed:  # the user's home is not in the sandbox: the run's agent home is HOME
            env["HOME"] = str(context.agent_home)
        return AgentCommand(argv=(str(executable), *argv[1:]), env=env, cwd=context.workspace, run_id=context.run_id)

    return launch
