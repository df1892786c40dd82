"""OpenCode (``opencode-ai``, ``opencode acp``): its per-run home, configuration and environment.

baton gives OpenCode a home of its own (``HOME`` and the XDG directories inside the run's agent
home) and its whole configuration in ``OPENCODE_CONFIG_CONTENT``: the Anthropic provider at
``ANTHROPIC_BASE_URL`` (key from ``ANTHROPIC_API_KEY``), the model, updates and sharing off,
and — where the mode matrix needs every call to reach baton's Gatekeeper — ``permission:
{"*": "ask"}``. It runs with ``--pure`` (no external plugins) and model-catalog fetches, LSP
downloads and default plugins off.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.agents.processes import RUN_ID_VARIABLE
from baton.agents.recipe import allowed_environment, native_setting, npm_arch
from baton.agents.subprocess import AgentCommand, LaunchContext

__all__ = ["DEFAULT_OPENCODE_MODEL", "OpenCodeSetting", "opencode_binary", "opencode_command", "opencode_config"]

DEFAULT_OPENCODE_MODEL = "anthropic/claude-sonnet-4-5"


@dataclass(frozen=True)
class OpenCodeSetting:
    """OpenCode's native setting: its ``permission`` configuration."""

    permission: Mapping[str, str] | None  # None: OpenCode's defaults (nothing asks)


def opencode_binary() -> str:
    # The npm .bin entry is a wrapper around this native binary; start the binary itself.
    return f"node_modules/opencode-linux-{npm_arch()}/bin/opencode"


def opencode_config(setting: OpenCodeSetting, base_url: str | None, model: str | None) -> dict[str, Any]:
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
    return config


def opencode_command(context: LaunchContext, executable: Path) -> AgentCommand:
    """The run's OpenCode home and environment, and how to start ``opencode acp`` for it."""
    setting = native_setting(context, OpenCodeSetting, "opencode")
    home = context.agent_home
    home.mkdir(parents=True, exist_ok=True)
    env = allowed_environment(context.parent, context.passthrough)
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_DATA_HOME": str(home / "data"),
            "XDG_CACHE_HOME": str(home / "cache"),
            "XDG_STATE_HOME": str(home / "state"),
            "ANTHROPIC_API_KEY": context.api_key,
            "OPENCODE_CONFIG_CONTENT": json.dumps(opencode_config(setting, context.base_url, context.model)),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            RUN_ID_VARIABLE: context.run_id,
        }
    )
    return AgentCommand(argv=(str(executable), "acp", "--pure"), env=env, cwd=context.workspace, run_id=context.run_id)
