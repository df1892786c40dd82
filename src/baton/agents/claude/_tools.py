"""How each Claude Code tool looks in ACP: kind, title, locations, diff content, command.

Pure functions over a ``tool_use`` block's name and input; the converter calls
:func:`describe_tool` once per proposed call.
"""

from __future__ import annotations

import posixpath
from typing import Any, NamedTuple

__all__ = ["SHELL_TOOLS", "TOOL_KINDS", "ToolView", "absolute", "describe_tool", "display_path"]

# Claude tool name → ACP ToolKind. Anything not listed (MCP tools, Skill, Cron…) is "other".
TOOL_KINDS: dict[str, str] = {
    "Read": "read",
    "NotebookRead": "read",
    "Write": "edit",
    "Edit": "edit",
    "MultiEdit": "edit",
    "NotebookEdit": "edit",
    "Glob": "search",
    "Grep": "search",
    "LS": "search",
    "ToolSearch": "search",
    "Bash": "execute",
    "BashOutput": "execute",
    "KillShell": "execute",
    "KillBash": "execute",
    "Monitor": "execute",
    "WebFetch": "fetch",
    "WebSearch": "fetch",
    "Task": "think",
    "Agent": "think",
    "TodoWrite": "think",
    "ExitPlanMode": "switch_mode",
    "EnterPlanMode": "switch_mode",
}

# Tools whose input names one shell command (``_meta.baton.command``).
SHELL_TOOLS = frozenset({"Bash"})

_FILE_KEYS = ("file_path", "notebook_path", "path")


class ToolView(NamedTuple):
    kind: str
    title: str
    locations: list[dict[str, Any]]
    content: list[dict[str, Any]]
    command: str | None


def absolute(path: str, cwd: str) -> str:
    """``path`` made absolute against ``cwd`` (lexically; nothing touches the disk)."""
    if path.startswith("/"):
        return posixpath.normpath(path)
    return posixpath.normpath(posixpath.join(cwd, path))


def display_path(path: str, cwd: str) -> str:
    """A short path for a title: relative to ``cwd`` when inside it, else as given."""
    if cwd and path.startswith(cwd):
        rest = path[len(cwd) :]
        if rest.startswith("/"):
            return rest[1:] or "."
        if not rest:
            return "."
    return path


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def describe_tool(name: str, tool_input: dict[str, Any], cwd: str) -> ToolView:
    kind = TOOL_KINDS.get(name, "other")
    file_path = None
    for key in _FILE_KEYS:
        raw = _str(tool_input.get(key))
        if raw is not None:
            file_path = absolute(raw, cwd)
            break
    locations: list[dict[str, Any]] = [{"path": file_path}] if file_path else []
    content: list[dict[str, Any]] = []
    command: str | None = None
    shown = display_path(file_path, cwd) if file_path else ""

    if name == "Bash":
        command = tool_input.get("command") if isinstance(tool_input.get("command"), str) else ""
        title = f"`{command}`" if command else "Bash"
    elif kind == "read":
        title = f"Read {shown}" if shown else name
    elif kind == "edit":
        title = f"{'Write' if name == 'Write' else 'Edit'} {shown}" if shown else name
        if file_path:
            content = _diffs(name, tool_input, file_path)
    elif kind == "search":
        title = _search_title(name, tool_input, shown)
        if not locations and name != "ToolSearch":
            locations = [{"path": posixpath.normpath(cwd)}]
    elif name == "WebFetch":
        title = f"Fetch {tool_input.get('url', '')}".rstrip()
    elif name == "WebSearch":
        title = f"Search the web: {tool_input.get('query', '')}".rstrip(": ")
    elif name in ("BashOutput", "KillShell", "KillBash"):
        shell = tool_input.get("bash_id") or tool_input.get("shell_id") or ""
        title = f"{'Output of' if name == 'BashOutput' else 'Kill'} shell {shell}".rstrip()
    elif name in ("Task", "Agent"):
        title = _str(tool_input.get("description")) or name
    elif name == "ExitPlanMode":
        title = "Exit plan mode"
    elif name == "EnterPlanMode":
        title = "Enter plan mode"
    elif name.startswith("mcp__"):
        server, _, tool = name[5:].partition("__")
        title = f"{server}: {tool}" if tool else name
    else:
        title = name
    return ToolView(kind, title, locations, content, command)


def _search_title(name: str, tool_input: dict[str, Any], shown: str) -> str:
    if name == "LS":
        return f"List {shown or '.'}"
    pattern = _str(tool_input.get("pattern")) or _str(tool_input.get("query"))
    verb = {"Glob": "Find", "Grep": "Search"}.get(name, name)
    title = f"{verb} `{pattern}`" if pattern else verb
    return f"{title} in {shown}" if shown else title


def _diffs(name: str, tool_input: dict[str, Any], path: str) -> list[dict[str, Any]]:
    if name == "Write":
        return [{"type": "diff", "path": path, "oldText": None, "newText": _text(tool_input, "content")}]
    if name == "Edit":
        return [_edit_diff(path, tool_input)]
    if name == "MultiEdit":
        edits = tool_input.get("edits")
        if isinstance(edits, list):
            return [_edit_diff(path, edit) for edit in edits if isinstance(edit, dict)]
    return []


def _edit_diff(path: str, edit: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "diff",
        "path": path,
        "oldText": _text(edit, "old_string"),
        "newText": _text(edit, "new_string"),
    }


def _text(mapping: dict[str, Any], key: str) -> str:
    value = mapping.get(key)
    return value if isinstance(value, str) else ""
