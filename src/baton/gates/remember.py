"""The rule a human's "remember for this session" stores: the narrowest useful rule for a call.

Never the bare tool (docs/design.md "Tool decision"): a ``Bash`` call gives ``Bash(<first words>:*)``
— the command word and, unless the next word is an option, that word too (``npm test -- -x``
→ ``Bash(npm test:*)``, ``python3 tool.py x`` → ``Bash(python3 tool.py:*)``, ``ls -la`` →
``Bash(ls:*)``); a file tool
its file (``Edit(//abs/path)``); ``WebFetch`` its host; ``Task`` its subagent type. A compound
or unparseable command, a command that writes a file by redirection, or a tool with nothing
narrower than itself gives no rule (None), and ``remember`` is refused for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from baton.events.commands import command_string
from baton.gates.commands import split_command
from baton.gates.modes import tool_group
from baton.gates.rules import RuleSyntaxError, parse_rule

__all__ = ["suggested_rule"]

_PATH_KEYS: Final = ("file_path", "notebook_path", "path")


def suggested_rule(tool_name: str | None, tool_input: Mapping[str, Any] | None) -> str | None:
    """The rule text to remember for a call of ``tool_name`` with ``tool_input``, or None."""
    data = tool_input or {}
    if not tool_name:
        return None
    rule: str | None = None
    if tool_name == "Bash":
        rule = _bash_rule(data.get("command"))
    elif tool_group(tool_name) in ("read", "search", "write"):
        path = next((data[key] for key in _PATH_KEYS if isinstance(data.get(key), str) and data[key]), None)
        if path is not None and path.startswith("/") and _plain(path):
            rule = f"{tool_name}(/{path})"
    elif tool_name == "WebFetch" and isinstance(data.get("url"), str):
        host = urlsplit(data["url"]).hostname
        rule = f"WebFetch(domain:{host})" if host else None
    elif tool_name in ("Task", "Agent") and isinstance(data.get("subagent_type"), str):
        rule = f"{tool_name}({data['subagent_type']})"
    if rule is None:
        return None
    try:
        parse_rule(rule)
    except RuleSyntaxError:
        return None
    return rule


def _bash_rule(command: Any) -> str | None:
    if not isinstance(command, (str, list)) or not command:
        return None
    parsed = split_command(command_string(command))
    if not parsed.parsed or len(parsed.parts) != 1 or parsed.parts[0].writes_file:
        return None
    words = parsed.parts[0].text.split()
    if not words or not _plain(words[0]):
        return None
    prefix = words[:2] if len(words) > 1 and not words[1].startswith("-") and _plain(words[1]) else words[:1]
    return "Bash(" + " ".join(prefix) + ":*)"


def _plain(text: str) -> bool:
    """No characters that would change what a rule means (globs, parentheses, quotes)."""
    return not any(c in text for c in "*?[]()'\"\\`$")
