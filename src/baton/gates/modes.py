"""Permission modes and tool groups: what each mode does when no rule decides.

A tool belongs to exactly one group. ``search`` (Glob, Grep) is its own group so decisions and
docs can name it, but it behaves like ``read`` in every mode and ``Read(...)`` rules cover it.
``meta`` (TodoWrite) only edits the agent's own to-do list: allowed in every mode.
``interaction`` (ExitPlanMode, AskUserQuestion) exists to reach a human: asked in every mode.
Unknown tools are asked in every mode (bypassPermissions included); only a rule can allow them.
"""

from __future__ import annotations

from typing import Literal, get_args

from baton.errors import UsageError

__all__ = [
    "MODES",
    "Behavior",
    "PermissionMode",
    "ToolGroup",
    "default_behavior",
    "parse_mode",
    "tool_group",
]

PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions"]
Behavior = Literal["allow", "deny", "ask"]
ToolGroup = Literal["read", "search", "write", "bash", "web", "agent", "mcp", "meta", "interaction", "unknown"]

MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)

_GROUPS: dict[str, ToolGroup] = {
    "Read": "read",
    "NotebookRead": "read",
    "LS": "read",
    "Glob": "search",
    "Grep": "search",
    "Write": "write",
    "Edit": "write",
    "MultiEdit": "write",
    "NotebookEdit": "write",
    "Bash": "bash",
    "BashOutput": "bash",
    "KillShell": "bash",
    "KillBash": "bash",
    "WebFetch": "web",
    "WebSearch": "web",
    "Task": "agent",
    "Agent": "agent",
    "TodoWrite": "meta",
    "ExitPlanMode": "interaction",
    "AskUserQuestion": "interaction",
}

# Behaviour by mode when no rule matched. Path-bearing groups (read, search, write) use the
# "inside" entry for paths inside the workspace and the "outside" entry otherwise.
_INSIDE: dict[ToolGroup, dict[PermissionMode, Behavior]] = {
    "read": {"default": "allow", "acceptEdits": "allow", "plan": "allow", "bypassPermissions": "allow"},
    "write": {"default": "ask", "acceptEdits": "allow", "plan": "deny", "bypassPermissions": "allow"},
    "bash": {"default": "ask", "acceptEdits": "ask", "plan": "deny", "bypassPermissions": "allow"},
    "web": {"default": "ask", "acceptEdits": "ask", "plan": "ask", "bypassPermissions": "allow"},
    "agent": {"default": "ask", "acceptEdits": "ask", "plan": "ask", "bypassPermissions": "allow"},
    "mcp": {"default": "ask", "acceptEdits": "ask", "plan": "ask", "bypassPermissions": "allow"},
    "meta": {"default": "allow", "acceptEdits": "allow", "plan": "allow", "bypassPermissions": "allow"},
    "interaction": {"default": "ask", "acceptEdits": "ask", "plan": "ask", "bypassPermissions": "ask"},
    "unknown": {"default": "ask", "acceptEdits": "ask", "plan": "ask", "bypassPermissions": "ask"},
}
_OUTSIDE: dict[ToolGroup, dict[PermissionMode, Behavior]] = {
    "read": {"default": "ask", "acceptEdits": "ask", "plan": "ask", "bypassPermissions": "allow"},
    "write": {"default": "ask", "acceptEdits": "ask", "plan": "deny", "bypassPermissions": "allow"},
}


def tool_group(tool_name: str) -> ToolGroup:
    """The group of one of baton's tool names (``mcp__…`` is ``mcp``; anything else unknown)."""
    if tool_name.startswith("mcp__"):
        return "mcp"
    return _GROUPS.get(tool_name, "unknown")


def default_behavior(mode: PermissionMode, group: ToolGroup, *, inside_workspace: bool = True) -> Behavior:
    """What ``mode`` does with a call of ``group`` when no rule matched."""
    key: ToolGroup = "read" if group == "search" else group
    table = _INSIDE if inside_workspace or key not in _OUTSIDE else _OUTSIDE
    return table[key][mode]


def parse_mode(mode: str) -> PermissionMode:
    """Validate a permission mode name (``UsageError("invalid_argument")`` otherwise)."""
    for known in MODES:
        if mode == known:
            return known
    raise UsageError(
        "invalid_argument",
        f"invalid permission mode {mode!r}; expected one of {', '.join(MODES)}",
        details={"mode": mode, "modes": list(MODES)},
    )
