"""Gemini CLI (``@google/gemini-cli --acp``): its per-run home, settings, policy and environment.

baton writes a fresh home for every run (``BATON_HOME/runs/<run>/agent-home``, Gemini CLI's
``~``) with ``.gemini/settings.json`` (API-key auth, usage statistics, telemetry, update checks
and checkpointing off) and, where the mode matrix needs every call to reach baton's
Gatekeeper, ``.gemini/policies/baton.toml``: a user-tier rule that answers ``ask_user`` for
every tool, above Gemini CLI's built-in rules that allow reads, searches and some commands.
The model endpoint comes from ``GOOGLE_GEMINI_BASE_URL`` and ``GEMINI_API_KEY``. The
repository's instructions (from the base commit) are its global memory, ``.gemini/GEMINI.md`` of
that home. Gemini CLI still reads the working tree's ``GEMINI.md`` itself: it does so in every
folder it trusts, and baton trusts the workspace (``GEMINI_CLI_TRUST_WORKSPACE``; an untrusted
folder forces its default approval mode); no setting of 0.61 turns that reading off.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.agents.processes import RUN_ID_VARIABLE
from baton.agents.recipe import allowed_environment, native_setting, node_program
from baton.agents.subprocess import AgentCommand, LaunchContext

__all__ = ["DEFAULT_GEMINI_MODEL", "GeminiSetting", "gemini_command", "gemini_environment", "write_gemini_home"]

DEFAULT_GEMINI_MODEL = "gemini-2.5-flash"  # a concrete model: "auto" routes through a classifier call
ASK_EVERY_TOOL_POLICY = """# Written by baton: every tool call reaches baton's Gatekeeper (session/request_permission).
[[rule]]
toolName = "*"
decision = "ask_user"
priority = 999
"""


@dataclass(frozen=True)
class GeminiSetting:
    """Gemini CLI's native setting: its session mode and whether every tool asks."""

    mode: str  # default | autoEdit | yolo | plan
    ask_every_tool: bool


def write_gemini_home(home: Path, setting: GeminiSetting, model: str | None, instructions: str | None = None) -> Path:
    """``home/.gemini/settings.json``, the policy file and the instructions (Gemini CLI's global
    memory, ``home/.gemini/GEMINI.md``); returns ``home``."""
    gemini = home / ".gemini"
    (gemini / "policies").mkdir(parents=True, exist_ok=True)
    settings: dict[str, Any] = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "checkpointing": {"enabled": False}},
        "model": {"name": model or DEFAULT_GEMINI_MODEL},
        "ui": {"hideBanner": True, "hideTips": True},
    }
    (gemini / "settings.json").write_text(json.dumps(settings, indent=1) + "\n")
    policy = gemini / "policies" / "baton.toml"
    if setting.ask_every_tool:
        policy.write_text(ASK_EVERY_TOOL_POLICY)
    elif policy.exists():
        policy.unlink()
    memory = gemini / "GEMINI.md"
    if instructions is not None:
        memory.write_text(instructions)
    else:
        memory.unlink(missing_ok=True)
    return home


def gemini_environment(
    *,
    run_id: str,
    home: Path,
    base_url: str | None,
    api_key: str,
    passthrough: tuple[str, ...],
    parent: Mapping[str, str],
) -> dict[str, str]:
    env = allowed_environment(parent, passthrough)
    env.update(
        {
            "HOME": str(home),
            "GEMINI_API_KEY": api_key,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "NO_COLOR": "1",
            RUN_ID_VARIABLE: run_id,
        }
    )
    if base_url:
        env["GOOGLE_GEMINI_BASE_URL"] = base_url
    return env


def gemini_command(context: LaunchContext, executable: Path) -> AgentCommand:
    """Write the run's Gemini home and return how to start ``gemini --acp`` for it."""
    setting = native_setting(context, GeminiSetting, "gemini")
    node = node_program(context, "gemini")
    home = write_gemini_home(context.agent_home, setting, context.model, context.instructions)
    env = gemini_environment(
        run_id=context.run_id,
        home=home,
        base_url=context.base_url,
        api_key=context.api_key,
        passthrough=context.passthrough,
        parent=context.parent,
    )
    argv = (node, str(executable), "--acp", "-m", context.model or DEFAULT_GEMINI_MODEL)
    return AgentCommand(argv=argv, env=env, cwd=context.workspace, run_id=context.run_id, session_mode=setting.mode)
