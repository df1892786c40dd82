"""OpenCode (``opencode-ai``, ``opencode acp``): its per-run home, configuration and environment.

baton gives OpenCode a home of its own (``HOME`` and the XDG directories inside the run's agent
home) and its whole configuration in ``OPENCODE_CONFIG_CONTENT``: the Anthropic provider at
``ANTHROPIC_BASE_URL`` (key from ``ANTHROPIC_API_KEY``), the model, updates and sharing off,
and — where the mode matrix needs every call to reach baton's Gatekeeper — ``permission:
{"*": "ask"}``. It runs with ``--pure`` (no external plugins) and model-catalog fetches, LSP
downloads and default plugins off; with ``OPENCODE_DISABLE_PROJECT_CONFIG`` it reads no
``AGENTS.md``/``CLAUDE.md`` (nor ``opencode.json``) of the working tree: the repository's
instructions, from the base commit, are a file of the agent home named in ``instructions``.

Its tool calls are annotated before they are logged (:func:`opencode_annotation`): the call's
announcement is titled with OpenCode's tool name (``write``, ``bash``), later updates with a
description (the file's name, the command), so the tool is named from the announcement; and a
``write`` tells only in its result whether the file existed (``rawOutput.metadata.exists``),
its diff (in the permission request) having ``oldText: ""`` either way; a ``bash`` gives its
exit code only there too (``rawOutput.metadata.exit``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.agents.processes import RUN_ID_VARIABLE
from baton.agents.recipe import allowed_environment, home_environment, native_setting, npm_arch
from baton.agents.subprocess import AgentCommand, LaunchContext

__all__ = [
    "DEFAULT_OPENCODE_MODEL",
    "OPENCODE_TOOLS",
    "OpenCodeSetting",
    "opencode_annotation",
    "opencode_binary",
    "opencode_command",
    "opencode_config",
    "write_opencode_instructions",
]

DEFAULT_OPENCODE_MODEL = "anthropic/claude-sonnet-4-5"

# OpenCode's tools (opencode-ai 1.18) → baton's names, as Claude Code calls the same tools.
OPENCODE_TOOLS = {
    "bash": "Bash",
    "edit": "Edit",
    "write": "Write",
    "patch": "Edit",
    "apply_patch": "Edit",
    "read": "Read",
    "grep": "Grep",
    "glob": "Glob",
    "list": "LS",
    "webfetch": "WebFetch",
    "todowrite": "TodoWrite",
    "todoread": "TodoRead",
    "task": "Task",
}


@dataclass(frozen=True)
class OpenCodeSetting:
    """OpenCode's native setting: its ``permission`` configuration."""

    permission: Mapping[str, str] | None  # None: OpenCode's defaults (nothing asks)


def opencode_binary() -> str:
    # The npm .bin entry is a wrapper around this native binary; start the binary itself.
    return f"node_modules/opencode-linux-{npm_arch()}/bin/opencode"


def opencode_config(
    setting: OpenCodeSetting, base_url: str | None, model: str | None, instructions: Path | None = None
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "model": model if model and "/" in model else (f"anthropic/{model}" if model else DEFAULT_OPENCODE_MODEL),
        "autoupdate": False,
        "share": "disabled",
    }
    if base_url:
        config["provider"] = {"anthropic": {"options": {"baseURL": base_url.rstrip("/") + "/v1"}}}
    if setting.permission is not None:
        config["permission"] = dict(setting.permission)
    if instructions is not None:
        config["instructions"] = [str(instructions)]
    return config


def write_opencode_instructions(home: Path, text: str | None) -> Path | None:
    """The repository's instructions as a file of the agent home (OpenCode's ``instructions``
    are files), or None (and no file) when there are none."""
    path = home / "baton-instructions" / "AGENTS.md"
    if text is None:
        path.unlink(missing_ok=True)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def opencode_annotation(tool_call: dict[str, Any]) -> dict[str, Any]:
    """``_meta.baton`` fields for an OpenCode tool call or update: ``tool_name`` from the call's
    announcement (``sessionUpdate: "tool_call"``, titled with the tool), ``change`` (``add`` or
    ``modify``) from a finished ``write``'s ``rawOutput.metadata.exists``, ``exit_code`` from a
    finished ``bash``'s ``rawOutput.metadata.exit``."""
    extra: dict[str, Any] = {}
    title = tool_call.get("title")
    if tool_call.get("sessionUpdate") == "tool_call" and isinstance(title, str):
        tool = OPENCODE_TOOLS.get(title.lower())
        if tool is not None:
            extra["tool_name"] = tool
    output = tool_call.get("rawOutput")
    metadata = output.get("metadata") if isinstance(output, dict) else None
    if tool_call.get("status") in ("completed", "failed") and isinstance(metadata, dict):
        exists = metadata.get("exists")
        if isinstance(exists, bool) and isinstance(metadata.get("filepath"), str):
            extra["change"] = "modify" if exists else "add"
        code = metadata.get("exit")  # bash
        if isinstance(code, int) and not isinstance(code, bool):
            extra["exit_code"] = code
    return extra


def opencode_command(context: LaunchContext, executable: Path) -> AgentCommand:
    """The run's OpenCode home and environment, and how to start ``opencode acp`` for it."""
    setting = native_setting(context, OpenCodeSetting, "opencode")
    home = context.agent_home
    home.mkdir(parents=True, exist_ok=True)
    instructions = write_opencode_instructions(home, context.instructions)
    env = allowed_environment(context.parent, context.passthrough)
    env.update(
        {
            **home_environment(home),
            "ANTHROPIC_API_KEY": context.api_key,
            "OPENCODE_CONFIG_CONTENT": json.dumps(
                opencode_config(setting, context.base_url, context.model, instructions)
            ),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            # No AGENTS.md/CLAUDE.md (nor opencode.json) of the working tree: the repository's
            # instructions come from baton (its base commit), in ``instructions``.
            "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
            "OPENCODE_DISABLE_CLAUDE_CODE_PROMPT": "1",
            RUN_ID_VARIABLE: context.run_id,
        }
    )
    return AgentCommand(argv=(str(executable), "acp", "--pure"), env=env, cwd=context.workspace, run_id=context.run_id)
