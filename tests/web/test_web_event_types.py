"""The run page listens for every runner event type baton emits (an SSE event the page does
not name is never delivered to it: ``EventSource`` dispatches named events only)."""

from __future__ import annotations

import re
from pathlib import Path

from baton.events import EVENT_TYPES

RUN_JS = Path(__file__).resolve().parents[2] / "src" / "baton" / "web" / "static" / "run.js"


def test_the_run_page_names_every_runner_event_type() -> None:
    block = re.search(r"const EVENT_TYPES = \[(.*?)\];", RUN_JS.read_text(), re.S)
    assert block is not None, "run.js has no EVENT_TYPES list"
    assert tuple(re.findall(r'"([a-z.]+)"', block.group(1))) == EVENT_TYPES
