"""What a run's log holds and what it means: the log-entry model (:mod:`baton.events.entry`),
the runner-event projection (:mod:`baton.events.project`, pure functions: the same log gives
the same events with the same ``seq`` on every read) and how commands are shown
(:mod:`baton.events.commands`)."""

from __future__ import annotations

from baton.events.entry import Direction, LogEntry, utc_timestamp
from baton.events.project import EVENT_TYPES, EventType, Projector, RunnerEvent, project

__all__ = [
    "EVENT_TYPES",
    "Direction",
    "EventType",
    "LogEntry",
    "Projector",
    "RunnerEvent",
    "project",
    "utc_timestamp",
]
