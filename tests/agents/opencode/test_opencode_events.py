"""OpenCode's file and command events, from a recorded run of the real ``opencode acp``
(opencode-ai 1.18.33, ``write-and-run`` on the scripted model): the write is an ``add`` by
``Write`` with its diff, the command has its exit code, and the live view shows them so.
"""

from __future__ import annotations

import io

from rich.console import Console
from tests.golden.codex import build_codex_sample

from baton.cli._render import LiveView
from baton.events.project import project


def test_a_write_is_an_add_by_write_with_its_diff() -> None:
    events = project(build_codex_sample("opencode-acp-allow"))
    changed = [event["data"] for event in events if event["type"] == "file.changed"]
    assert changed == [
        {
            "path": "hello.txt",
            "abs_path": "/home/dev/ocwork1/hello.txt",
            "change": "add",
            "tool": "Write",
            "tool_call_id": "toolu_7588f4baac2a4354af9a97bd",
            "diff": {"old_text": "", "new_text": "hello from baton\n"},
        }
    ]
    finished = next(event["data"] for event in events if event["type"] == "command.finished")
    assert (finished["command"], finished["exit_code"]) == ("echo hi", 0)
    started = next(event["data"] for event in events if event["type"] == "command.started")
    assert started["tool"] == "Bash"


def test_the_live_view_shows_the_write_and_its_diff() -> None:
    out = io.StringIO()
    view = LiveView(Console(file=out, width=80, color_system=None))
    for event in project(build_codex_sample("opencode-acp-allow")):
        view.show(dict(event))
    text = out.getvalue()
    assert "✎ add hello.txt (Write)" in text, text
    assert "+hello from baton" in text, text
    assert "unknown" not in text
