"""Codex (``@zed-industries/codex-acp``): its per-run home, its configuration and environment.

Codex reads its provider from ``$CODEX_HOME/config.toml`` and ignores ``OPENAI_BASE_URL``, so
baton writes a fresh home for every run (``BATON_HOME/runs/<run>/agent-home/codex``) with:

- a provider ``baton`` built from ``OPENAI_BASE_URL`` (default ``https://api.openai.com/v1``)
  whose key is read from ``OPENAI_API_KEY`` (``env_key``), on the Responses wire API, with
  request and stream retries set to ``model_max_retries`` when configured (``--scenario`` and
  the tests use 0: an API error fails the turn at once), else Codex's own defaults;
- analytics, feedback, update checks, plugins and the web search tool off;
- the repository's instructions (baton.workspaces.instructions) as ``developer_instructions``,
  and ``project_doc_max_bytes = 0``: Codex reads no ``AGENTS.md`` of the working tree itself;
- the approval policy and sandbox that the registry's mode matrix gives baton's mode, and
  execpolicy rules (``rules/baton.rules``) that make Codex ask even for the commands it
  treats as safe, where the matrix needs every command to reach baton's Gatekeeper.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from baton.agents.processes import RUN_ID_VARIABLE
from baton.agents.recipe import allowed_environment, native_setting
from baton.agents.subprocess import AgentCommand, LaunchContext

__all__ = [
    "DEFAULT_OPENAI_BASE_URL",
    "SAFE_PROGRAMS",
    "CodexSetting",
    "codex_command",
    "codex_environment",
    "write_codex_home",
]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-5.5"  # a slug of Codex's catalog: unknown slugs lose tools (apply_patch)

# Programs Codex runs without asking under every approval policy ("known safe" commands);
# a `prompt` rule for each makes them reach the Gatekeeper like any other command.
SAFE_PROGRAMS = (
    "base64",
    "cat",
    "cd",
    "cut",
    "echo",
    "expr",
    "false",
    "find",
    "git",
    "grep",
    "head",
    "id",
    "ls",
    "nl",
    "paste",
    "pwd",
    "rev",
    "rg",
    "sed",
    "seq",
    "sort",
    "stat",
    "tail",
    "tr",
    "true",
    "uname",
    "uniq",
    "wc",
    "which",
    "whoami",
)


@dataclass(frozen=True)
class CodexSetting:
    """Codex's native permission setting for one baton mode (see the registry's matrix)."""

    approval_policy: str  # untrusted | on-request | never
    sandbox_mode: str  # read-only | workspace-write | danger-full-access
    ask_for_safe_commands: bool  # write execpolicy rules that prompt for SAFE_PROGRAMS


def _toml_string(value: str) -> str:
    # A JSON string is a TOML basic string, but for the \u escapes of surrogates (emoji, with
    # ensure_ascii) and a raw DEL, which TOML refuses: keep non-ASCII as is, escape DEL.
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def write_codex_home(
    home: Path,
    *,
    base_url: str | None,
    model: str | None,
    setting: CodexSetting,
    max_retries: int | None = None,
    instructions: str | None = None,
) -> Path:
    """Write ``config.toml`` (and the rules file) into ``home``; returns ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    url = (base_url or DEFAULT_OPENAI_BASE_URL).rstrip("/")
    if not url.endswith("/v1"):
        url += "/v1"
    lines = [
        "# Written by baton for one run; see baton/agents/codex.py.",
        f"model = {_toml_string(model or DEFAULT_MODEL)}",
        'model_provider = "baton"',
        f"approval_policy = {_toml_string(setting.approval_policy)}",
        f"sandbox_mode = {_toml_string(setting.sandbox_mode)}",
        'web_search = "disabled"',
        "check_for_update_on_startup = false",
        # The repository's instructions come from baton (its base commit), never Codex's own
        # reading of AGENTS.md in the working tree.
        "project_doc_max_bytes = 0",
        *([f"developer_instructions = {_toml_string(instructions)}"] if instructions else []),
        "",
        "[tools]",
        "view_image = false",
        "",
        "[model_providers.baton]",
        'name = "baton"',
        f"base_url = {_toml_string(url)}",
        'wire_api = "responses"',
        'env_key = "OPENAI_API_KEY"',
        *(
            [f"request_max_retries = {max_retries}", f"stream_max_retries = {max_retries}"]
            if max_retries is not None
            else []
        ),
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[feedback]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
        "remote_plugin = false",
        "",
        "[projects." + _toml_string("/") + "]",
        'trust_level = "untrusted"',
        "",
    ]
    (home / "config.toml").write_text("\n".join(lines))
    rules = home / "rules"
    rules.mkdir(exist_ok=True)
    rules_file = rules / "baton.rules"
    if setting.ask_for_safe_commands:
        body = [f'prefix_rule(pattern = [{_toml_string(program)}], decision = "prompt")' for program in SAFE_PROGRAMS]
        rules_file.write_text(
            "# Written by baton: every command reaches baton's Gatekeeper.\n" + "\n".join(body) + "\n"
        )
    elif rules_file.exists():
        rules_file.unlink()
    return home


def codex_environment(
    *,
    run_id: str,
    codex_home: Path,
    api_key: str,
    passthrough: tuple[str, ...],
    parent: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Everything codex-acp (and the commands it runs) may see."""
    env = allowed_environment(os.environ if parent is None else parent, passthrough)
    # Codex refuses to create its sandbox helpers (codex-linux-sandbox, apply_patch) in a
    # home under the temporary directory, and every sandboxed command then fails: point
    # TMPDIR at the agent's own home so a BATON_HOME under /tmp works too.
    tmp = codex_home.parent / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "HOME": str(codex_home.parent),
            "TMPDIR": str(tmp),
            "CODEX_HOME": str(codex_home),
            "OPENAI_API_KEY": api_key,
            "NO_COLOR": "1",
            "RUST_LOG": "error",
            RUN_ID_VARIABLE: run_id,
        }
    )
    return env


def codex_command(context: LaunchContext, executable: Path) -> AgentCommand:
    """Write the run's ``CODEX_HOME`` and return how to start codex-acp for it."""
    setting = native_setting(context, CodexSetting, "codex")
    home = write_codex_home(
        context.agent_home / "codex",
        base_url=context.base_url,
        model=context.model,
        setting=setting,
        max_retries=context.max_retries,
        instructions=context.instructions,
    )
    env = codex_environment(
        run_id=context.run_id,
        codex_home=home,
        api_key=context.api_key,
        passthrough=context.passthrough,
        parent=context.parent,
    )
    return AgentCommand(argv=(str(executable),), env=env, cwd=context.workspace, run_id=context.run_id)
