"""Kilo Code CLI (``@kilocode/cli``, ``kilo acp``): its per-run home, configuration and environment.

Kilo Code's CLI is a fork of OpenCode and is configured the same way under its own names:
baton gives it a home of its own (``HOME`` and the XDG directories inside the run's agent home)
and its whole configuration in ``KILO_CONFIG_CONTENT``: the Anthropic provider at
``ANTHROPIC_BASE_URL`` (key from ``ANTHROPIC_API_KEY``), the model, updates and sharing off, and
— where the mode matrix needs every call to reach baton's Gatekeeper — ``permission: {"*":
"ask"}``. It runs with ``--pure`` (no external plugins), model-catalog fetches, LSP downloads,
default plugins, session ingest and Claude Code compatibility off; with
``KILO_DISABLE_PROJECT_CONFIG`` it reads no ``AGENTS.md``/``CLAUDE.md`` (nor ``kilo.json``) of the
working tree: the repository's instructions, from the base commit, are a file of the agent home
named in ``instructions``.

Its ACP messages are OpenCode's, so its tool calls are annotated as OpenCode's
(:func:`baton.agents.opencode.opencode_annotation`).
"""

from __future__ import annotations

import json
from pathlib import Path

from baton.agents.opencode import OpenCodeSetting, opencode_config, write_opencode_instructions
from baton.agents.processes import RUN_ID_VARIABLE
from baton.agents.recipe import allowed_environment, home_environment, native_setting, npm_arch
from baton.agents.subprocess import AgentCommand, LaunchContext

__all__ = ["kilo_binary", "kilo_command", "kilo_config"]


def kilo_binary() -> str:
    # The npm .bin entry is a wrapper around this native binary; start the binary itself.
    return f"node_modules/@kilocode/cli-linux-{npm_arch()}/bin/kilo"


def kilo_config(
    setting: OpenCodeSetting, base_url: str | None, model: str | None, instructions: Path | None = None
) -> dict[str, object]:
    config = opencode_config(setting, base_url, model, instructions)
    config["$schema"] = "https://app.kilo.ai/config.json"
    return config


def kilo_command(context: LaunchContext, executable: Path) -> AgentCommand:
    """The run's Kilo home and environment, and how to start ``kilo acp`` for it."""
    setting = native_setting(context, OpenCodeSetting, "kilo")
    home = context.agent_home
    home.mkdir(parents=True, exist_ok=True)
    instructions = write_opencode_instructions(home, context.instructions)
    env = allowed_environment(context.parent, context.passthrough)
    env.update(
        {
            **home_environment(home),
            "ANTHROPIC_API_KEY": context.api_key,
            "KILO_CONFIG_CONTENT": json.dumps(kilo_config(setting, context.base_url, context.model, instructions)),
            "KILO_DISABLE_AUTOUPDATE": "1",
            "KILO_DISABLE_MODELS_FETCH": "1",
            "KILO_DISABLE_LSP_DOWNLOAD": "1",
            "KILO_DISABLE_DEFAULT_PLUGINS": "1",
            "KILO_DISABLE_SHARE": "1",
            "KILO_DISABLE_SESSION_INGEST": "1",
            "KILO_DISABLE_EXTERNAL_SKILLS": "1",
            # No AGENTS.md/CLAUDE.md (nor kilo.json) of the working tree: the repository's
            # instructions come from baton (its base commit), in ``instructions``.
            "KILO_DISABLE_PROJECT_CONFIG": "1",
            "KILO_DISABLE_CLAUDE_CODE": "1",
            "KILO_DISABLE_CLAUDE_CODE_PROMPT": "1",
            "KILO_DISABLE_CLAUDE_CODE_SKILLS": "1",
            RUN_ID_VARIABLE: context.run_id,
        }
    )
    return AgentCommand(argv=(str(executable), "acp", "--pure"), env=env, cwd=context.workspace, run_id=context.run_id)
