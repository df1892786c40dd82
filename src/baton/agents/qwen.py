"""Qwen Code (``@qwen-code/qwen-code --acp``): its per-run home, settings and environment.

baton writes a fresh home for every run (``BATON_HOME/runs/<run>/agent-home``, Qwen Code's
``~``) with ``.qwen/settings.json``: OpenAI-compatible auth (Chat Completions at
``OPENAI_BASE_URL``, key from ``OPENAI_API_KEY``), the model, usage statistics, telemetry, update
checks and checkpointing off, and — where the mode matrix needs every call to reach baton's
Gatekeeper — ``permissions.ask`` rules naming every tool category (Qwen Code's rules take
Claude Code's names: ``Read`` covers ``read_file``, ``grep_search``, ``glob``,
``list_directory``; ``Edit`` covers ``edit``, ``write_file``, ``notebook_edit``; ``Bash`` the
shell). ``ask`` rules take precedence over Qwen Code's own allow decisions (read-only tools,
commands it calls read-only).

The same file is its *system* settings too (``QWEN_CODE_SYSTEM_SETTINGS_PATH``), the tier above a
repository's ``.qwen/settings.json``, so a repository cannot change them. Its context file name
(``context.fileName``) is one of the run's own, ``baton-instructions-<run>.md``: Qwen Code reads no
``QWEN.md``/``AGENTS.md`` of the working tree, and the repository's instructions (from the base
commit) are its global memory, ``~/.qwen/<that name>``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.agents.processes import RUN_ID_VARIABLE
from baton.agents.recipe import allowed_environment, native_setting, node_program
from baton.agents.subprocess import AgentCommand, LaunchContext

__all__ = [
    "ASK_EVERY_TOOL",
    "DEFAULT_QWEN_MODEL",
    "QWEN_TOOLS",
    "QwenSetting",
    "instructions_file_name",
    "qwen_command",
    "qwen_settings",
    "qwen_tool_name",
]

DEFAULT_QWEN_MODEL = "qwen3-coder-plus"
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"

# Qwen Code's permission rules (Claude Code's names and its own) that make every tool ask.
ASK_EVERY_TOOL = (
    "Bash",
    "Read",
    "Edit",
    "WebFetch",
    "WebSearch",
    "Agent",
    "Skill",
    "exec",
    "read_mcp_resource",
    "zoom_image",
)

# Qwen Code's tools (0.24) → baton's names, as Claude Code calls the same tools.
QWEN_TOOLS = {
    "run_shell_command": "Bash",
    "exec": "Bash",
    "monitor": "Bash",
    "edit": "Edit",
    "write_file": "Write",
    "notebook_edit": "NotebookEdit",
    "read_file": "Read",
    "read_many_files": "Read",
    "zoom_image": "Read",
    "grep_search": "Grep",
    "glob": "Glob",
    "list_directory": "LS",
    "web_fetch": "WebFetch",
    "web_search": "WebSearch",
    "todo_write": "TodoWrite",
    "agent": "Task",
    "task": "Task",
    "skill": "Skill",
    "exit_plan_mode": "ExitPlanMode",
    "ask_user_question": "AskUserQuestion",
}


@dataclass(frozen=True)
class QwenSetting:
    """Qwen Code's native setting: its approval mode and whether every tool asks."""

    mode: str  # default | plan | auto-edit | auto | yolo
    ask_every_tool: bool


def instructions_file_name(run_id: str) -> str:
    """The run's context file name: no repository holds it, so Qwen Code reads none of theirs."""
    return f"baton-instructions-{run_id}.md"


def qwen_settings(
    setting: QwenSetting, model: str | None, max_retries: int | None = None, context_file: str = "QWEN.md"
) -> dict[str, Any]:
    model_settings: dict[str, Any] = {"name": model or DEFAULT_QWEN_MODEL}
    if max_retries is not None:
        model_settings["generationConfig"] = {"maxRetries": max_retries}
    settings: dict[str, Any] = {
        "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": False}},
        "model": model_settings,
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "checkpointing": {"enabled": False}},
        "tools": {"approvalMode": setting.mode},
        "context": {"fileName": context_file},
    }
    if setting.ask_every_tool:
        settings["permissions"] = {"ask": list(ASK_EVERY_TOOL)}
    return settings


def qwen_tool_name(tool_call: dict[str, Any]) -> str | None:
    """baton's name for a Qwen Code tool call (its ``_meta.toolName`` or the ``rawInput``'s shape)."""
    meta = tool_call.get("_meta")
    name = meta.get("toolName") if isinstance(meta, dict) else None
    if isinstance(name, str):
        return QWEN_TOOLS.get(name, name)
    return None


def qwen_command(context: LaunchContext, executable: Path) -> AgentCommand:
    """Write the run's Qwen Code home and return how to start ``qwen --acp`` for it."""
    setting = native_setting(context, QwenSetting, "qwen")
    node = node_program(context, "qwen")
    home = context.agent_home
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    context_file = instructions_file_name(context.run_id)
    settings = qwen_settings(setting, context.model, context.max_retries, context_file)
    settings_file = home / ".qwen" / "settings.json"
    settings_file.write_text(json.dumps(settings, indent=1) + "\n")
    memory = home / ".qwen" / context_file
    if context.instructions is not None:
        memory.write_text(context.instructions)
    else:
        memory.unlink(missing_ok=True)
    (home / "tmp").mkdir(exist_ok=True)
    url = (context.base_url or DEFAULT_OPENAI_BASE_URL).rstrip("/")
    if not url.endswith("/v1"):
        url += "/v1"
    env = allowed_environment(context.parent, context.passthrough)
    env.update(
        {
            "HOME": str(home),
            "TMPDIR": str(home / "tmp"),
            "OPENAI_API_KEY": context.api_key,
            "OPENAI_BASE_URL": url,
            "OPENAI_MODEL": context.model or DEFAULT_QWEN_MODEL,
            "QWEN_CODE_SYSTEM_SETTINGS_PATH": str(settings_file),
            "NO_COLOR": "1",
            RUN_ID_VARIABLE: context.run_id,
        }
    )
    argv = (node, str(executable), "--acp", "--auth-type", "openai")
    return AgentCommand(argv=argv, env=env, cwd=context.workspace, run_id=context.run_id, session_mode=setting.mode)
