"""A resumed run that records or replays a cassette goes on doing so (docs/resume.md, docs/scenarios.md).

- A **replayed** run (``model_source`` ``kind: cassette``) continues on a scripted server of its
  own playing the rest of the cassette: the exchanges its earlier executions were answered with
  are in the run's journal (``cassette-answered.jsonl`` in the run's directory, written by the
  player as it answers) and are never answered again. A run continuing an ended one starts from
  its parent's journal. When every exchange that answers the task (those offering tools) was
  answered, there is nothing to replay: ``cassette_exhausted``, before the run is taken over.
- A **recorded** run (its source has ``"record": FILE``) records on: its resume's model traffic
  passes a model proxy whose recorder appends to FILE (``CassetteRecorder.continue_file``), so a
  run that parked on a gate and was resumed is one cassette, whose replay parks and resumes alike.

``baton resume RUN --scenario NAME`` leaves both: the run continues on that scenario.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from baton.cassettes.matching import offers_tools
from baton.config import Settings
from baton.errors import RefusedError
from baton.runs.model_source import RunModel

__all__ = ["JOURNAL", "bind_resumed", "journal_path", "keep_journal", "recording_of", "skip_answered"]

JOURNAL: Final = "cassette-answered.jsonl"


def recording_of(source: Any) -> Path | None:
    """The cassette a recorded ``model_source`` writes (its ``record``); None when it records none."""
    if isinstance(source, Mapping) and isinstance(source.get("record"), str):
        return Path(str(source["record"]))
    return None


def journal_path(settings: Settings, run_id: str) -> Path:
    return settings.run_dir(run_id) / JOURNAL


def keep_journal(model: RunModel, settings: Settings, run_id: str) -> None:
    """A replaying run's player notes each answer in the run's journal (what a resume skips)."""
    if model.player is not None:
        model.player.journal = journal_path(settings, run_id)


def skip_answered(model: RunModel, settings: Settings, run_id: str) -> None:
    """A resumed replay: skip what run ``run_id``'s executions were answered with; ``cassette_exhausted``
    when nothing that answers the task is left. A resumed recording: append to its cassette."""
    if model.recorder is not None:
        model.recorder.continue_file()
    player = model.player
    if player is None:
        return
    from baton.testing import answered_in

    answered = answered_in(journal_path(settings, run_id), player.cassette.path)
    player.skip(answered)
    if not player.remaining():
        tasks = sum(1 for exchange in player.cassette.exchanges if offers_tools(exchange.body))
        raise RefusedError(
            "cassette_exhausted",
            f"run {run_id} was answered with all {tasks} recorded requests of the cassette {player.cassette.path}: "
            "there is nothing left to replay (continue it on a scenario with --scenario NAME)",
            details={"cassette": str(player.cassette.path), "answered": sorted(answered)},
        )


def bind_resumed(model: RunModel, settings: Settings, *, source_run: str, run_id: str, workspace: Path) -> None:
    """The resumed execution's paths and journal: run ``run_id`` (the same run, or a new one
    continuing the ended ``source_run``, which takes over its journal)."""
    model.bind(workspace=workspace.resolve(), agent_home=settings.run_dir(run_id) / "agent-home")
    if run_id != source_run:
        earlier, mine = journal_path(settings, source_run), journal_path(settings, run_id)
        if earlier.is_file() and not mine.exists():
            mine.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(earlier, mine)
    keep_journal(model, settings, run_id)
