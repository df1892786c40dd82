"""The run page shows every runner event type baton emits as what it is (a ``case`` of its
own in ``RunView.show``), never as the bare type name of the fallback."""

from __future__ import annotations

import re
from pathlib import Path

from baton.events import EVENT_TYPES

RUN_JS = Path(__file__).resolve().parents[2] / "src" / "baton" / "web" / "static" / "run.js"


def test_the_run_page_shows_every_runner_event_type() -> None:
    cases = set(re.findall(r'^\s*case "([a-z._]+)":', RUN_JS.read_text(), re.M))
    assert set(EVENT_TYPES) <= cases, sorted(set(EVENT_TYPES) - cases)
