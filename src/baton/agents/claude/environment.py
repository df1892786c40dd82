"""The environment Claude Code runs with: an allow-list, never the baton process's own."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path

from baton.agents.processes import RUN_ID_VARIABLE
from baton.errors import AgentError

__all__ = ["bundled_claude_binary", "claude_environment"]

# Variables that are neither secret nor run-specific and that tools commonly need.
_SYSTEM_VARIABLES = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")


def bundled_claude_binary() -> Path:
    """The Claude Code binary shipped inside the claude-agent-sdk wheel."""
    # Found without importing claude-agent-sdk (which costs a second): the registry needs only the path.
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or spec.origin is None:
        raise AgentError("agent_not_installed", "claude-agent-sdk is not installed")
    binary = Path(spec.origin).parent / "_bundled" / "claude"
    if not binary.is_file():
        raise AgentError("agent_not_installed", f"Claude Code is not bundled at {binary}; reinstall claude-agent-sdk")
    return binary


def claude_environment(
    *,
    run_id: str,
    agent_home: Path,
    base_url: str | None,
    api_key: str,
    passthrough: tuple[str, ...],
    parent: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Everything the CLI (and the tools it runs) may see."""
    source = os.environ if parent is None else parent
    env = {name: source[name] for name in (*_SYSTEM_VARIABLES, *passthrough) if name in source}
    config_dir = agent_home / ".claude"
    config_dir.mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "HOME": str(agent_home),
            "CLAUDE_CONFIG_DIR": str(config_dir),
            "ANTHROPIC_API_KEY": api_key,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            RUN_ID_VARIABLE: run_id,
        }
    )
    if base_url:
        env["ANTHROPIC_BASE_URL"] = base_url
    return env
