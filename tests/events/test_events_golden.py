"""The recorded Claude streams and the minimal sequences, against their golden JSON.

Regenerate on purpose with ``python -m tests.golden.regen`` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp.schema import SessionNotification

from baton.events.project import EVENT_TYPES, project
from golden.build import GOLDEN, SAMPLES, build_sample
from golden.regen import expected_files

FILES = expected_files()


@pytest.mark.parametrize("path", sorted(FILES), ids=lambda p: str(p.relative_to(GOLDEN)))
def test_golden_file_matches(path: Path) -> None:
    assert path.exists(), f"missing {path}: run python -m tests.golden.regen"
    assert json.loads(path.read_text()) == json.loads(FILES[path])


def test_golden_events_cover_every_event_type() -> None:
    seen = set()
    for path in GOLDEN.glob("**/*.events.json"):
        seen |= {event["type"] for event in json.loads(path.read_text())}
    for path in (GOLDEN / "events").glob("*.json"):
        events = json.loads(path.read_text())["events"]
        seen |= {event["type"] for event in events}
        assert path.stem in {event["type"] for event in events}, f"{path.name} lacks its own type"
    assert seen == set(EVENT_TYPES)


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_updates_are_valid_acp(name: str) -> None:
    updates, _ = build_sample(name)
    for update in updates:
        SessionNotification.model_validate({"sessionId": "s", "update": update})


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_projection_is_deterministic_and_gapless(name: str) -> None:
    _, entries = build_sample(name)
    first, second = project(entries), project(entries)
    assert first == second
    assert [event["seq"] for event in first] == list(range(1, len(first) + 1))
    assert first[-1]["type"] in ("task.finished", "task.failed")
    assert [event["type"] for event in first].count("task.started") == 1
    by_seq = {entry["seq"]: entry for entry in entries}
    for event in first:
        assert event["raw"] is by_seq[event["log_seq"]]["payload"]
        assert event["ts"] == by_seq[event["log_seq"]]["ts"]
