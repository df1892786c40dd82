"""Claude through Zed's ACP adapter (``@zed-industries/claude-agent-acp``): its home and its command.

claude-agent-acp wraps the TypeScript Claude Agent SDK and asks its ACP client through the
SDK's ``canUseTool``, which Claude Code calls only when it would ask a human itself (never for
a Read in the workspace or ``echo``). To make every call reach baton's Gatekeeper, baton
writes the run's user settings (``agent-home/.claude/settings.json``) with a ``PreToolUse``
hook on every tool that answers ``ask``, loads **only** those (``settingSources: ["user"]``
through ``session/new``'s ``_meta.claudeCode.options``, so the repository's
``.claude/settings*.json`` — hooks, allow rules, a ``defaultMode`` — is never read by Claude
Code), and sets the session's mode to ``default`` right after ``session/new`` (the adapter
reads ``permissions.defaultMode`` from the repository's settings on its own).

``CLAUDE_CODE_EXECUTABLE`` points at the Claude Code binary bundled in claude-agent-sdk's wheel:
without it the adapter starts the SDK's JavaScript CLI and ``session/new`` takes 6–11 s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.agents.claude.environment import bundled_claude_binary, claude_environment
from baton.agents.recipe import native_setting, node_program
from baton.agents.subprocess import AgentCommand, LaunchContext

__all__ = ["ASK_EVERY_TOOL", "UNGATED_TOOLS", "ClaudeAcpSetting", "claude_acp_command", "write_claude_acp_settings"]

# A PreToolUse hook's answer that sends the call to canUseTool, i.e. to the ACP client.
_ASK = {
    "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "ask",
        "permissionDecisionReason": "baton decides every tool call",
    }
}
UNGATED_TOOLS = ("Glob", "Grep")
ASK_EVERY_TOOL: dict[str, Any] = {
    "hooks": {
        "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "echo '" + json.dumps(_ASK) + "'"}]}]
    }
}


@dataclass(frozen=True)
class ClaudeAcpSetting:
    """claude-agent-acp's native setting: its session mode and whether every tool asks."""

    mode: str  # default | acceptEdits | plan | dontAsk | bypassPermissions
    ask_every_tool: bool

    def session_meta(self, instructions: str | None = None) -> dict[str, Any]:
        """``_meta`` of ``session/new``: Claude Code reads the run's user settings and nothing else
        (no ``CLAUDE.md`` of the working tree: that is the ``project`` source); the repository's
        ``instructions`` are appended to its system prompt."""
        options: dict[str, Any] = {"settingSources": ["user"]}
        if self.ask_every_tool:
            # Glob and Grep run without asking whatever a hook or an ask rule says, even on
            # paths outside the workspace (found here): they are not offered; Bash (gated) can search.
            options["disallowedTools"] = list(UNGATED_TOOLS)
        meta: dict[str, Any] = {"claudeCode": {"options": options}}
        if instructions:
            meta["systemPrompt"] = {"append": instructions}
        return meta


def write_claude_acp_settings(config_dir: Path, setting: ClaudeAcpSetting) -> Path:
    """The run's ``settings.json`` (Claude Code's user settings) for ``setting``."""
    config_dir.mkdir(parents=True, exist_ok=True)
    settings: dict[str, Any] = dict(ASK_EVERY_TOOL) if setting.ask_every_tool else {}
    settings["permissions"] = {"defaultMode": setting.mode}
    path = config_dir / "settings.json"
    path.write_text(json.dumps(settings, indent=1) + "\n")
    return path


def claude_acp_command(context: LaunchContext, executable: Path) -> AgentCommand:
    """Write the run's Claude home and return how to start claude-agent-acp (``node index.js``)."""
    setting = native_setting(context, ClaudeAcpSetting, "claude-acp")
    node = node_program(context, "claude-acp")
    env = claude_environment(
        run_id=context.run_id,
        agent_home=context.agent_home,
        base_url=context.base_url,
        api_key=context.api_key,
        passthrough=context.passthrough,
        parent=context.parent,
    )
    write_claude_acp_settings(Path(env["CLAUDE_CONFIG_DIR"]), setting)
    env["CLAUDE_CODE_EXECUTABLE"] = str(bundled_claude_binary())
    if context.max_retries is not None:
        env["CLAUDE_CODE_MAX_RETRIES"] = str(max(context.max_retries, 1))
    return AgentCommand(
        argv=(node, str(executable)),
        env=env,
        cwd=context.workspace,
        run_id=context.run_id,
        session_meta=setting.session_meta(context.instructions),
        session_mode=setting.mode,
    )
