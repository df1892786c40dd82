"""The rule "remember for this session" stores: narrow, never the bare tool."""

from __future__ import annotations

from typing import Any

import pytest

from baton.gates.remember import suggested_rule


@pytest.mark.parametrize(
    ("tool", "tool_input", "rule"),
    [
        ("Bash", {"command": "npm test"}, "Bash(npm test:*)"),
        ("Bash", {"command": "npm test -- --watch=false"}, "Bash(npm test:*)"),
        ("Bash", {"command": "git status --short"}, "Bash(git status:*)"),
        ("Bash", {"command": "python3 tool.py --fast"}, "Bash(python3 tool.py:*)"),
        ("Bash", {"command": "ls -la"}, "Bash(ls:*)"),
        ("Bash", {"command": "pytest"}, "Bash(pytest:*)"),
        ("Bash", {"command": ["/bin/bash", "-lc", "cargo build --release"]}, "Bash(cargo build:*)"),
        ("Edit", {"file_path": "/work/repo/src/app.py"}, "Edit(//work/repo/src/app.py)"),
        ("Write", {"file_path": "/work/repo/notes.md", "content": "x"}, "Write(//work/repo/notes.md)"),
        ("WebFetch", {"url": "https://docs.python.org/3/library/"}, "WebFetch(domain:docs.python.org)"),
        ("Task", {"subagent_type": "Explore", "prompt": "look"}, "Task(Explore)"),
    ],
)
def test_the_suggested_rule(tool: str, tool_input: dict[str, Any], rule: str) -> None:
    assert suggested_rule(tool, tool_input) == rule


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Bash", {"command": "npm test && rm -rf /"}),  # two commands: no one rule allows both narrowly
        ("Bash", {"command": "echo $(whoami)"}),
        ("Bash", {"command": "echo hi > out.txt"}),  # writes a file the rule would not name
        ("Bash", {"command": "echo 'unterminated"}),
        ("Bash", {"command": ""}),
        ("Bash", {}),
        ("Edit", {"file_path": "relative/path.py"}),
        ("Edit", {"file_path": "/repo/src/*.py"}),
        ("mcp__github__create_issue", {"title": "x"}),
        ("NotATool", {}),
        (None, {"command": "ls"}),
    ],
)
def test_no_rule_rather_than_the_whole_tool(tool: str | None, tool_input: dict[str, Any]) -> None:
    assert suggested_rule(tool, tool_input) is None
