"""A run already in the log made into a cassette or a scenario: ``baton record-scenario`` (docs/scenarios.md).

What a run can become depends on where its model came from (its ``model_source``,
baton.runs.model_source):

- a run recorded with ``--record FILE`` (its source has ``"record"``) or replayed from a cassette
  (``kind: cassette``): its cassette, copied (``--as cassette``), or a scenario written from the
  cassette's answers (``--as scenario``, :func:`baton.testing.scenario_from_cassette`);
- a run on a scenario without a recording: that scenario's file (``--as scenario``); its model
  traffic was not kept, so ``--as cassette`` is ``run_not_recorded``;
- a run on a real endpoint without a recording: ``run_not_recorded`` (nothing of its model's
  answers was kept); so is a run whose cassette file is gone.

``--out`` is never overwritten without ``force`` (``output_exists``); the file is written whole
or not at all.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from baton.errors import RefusedError, UsageError
from baton.events.entry import LogEntry
from baton.store.records import RunRecord

__all__ = ["RecordedScenario", "WrittenAs", "record_scenario", "run_cassette", "run_model_source"]

WrittenAs = Literal["cassette", "scenario"]
_FIRST_ENTRIES = 10  # a run's ``_baton/run_started`` is among its first log entries


@dataclass(frozen=True)
class RecordedScenario:
    """What ``record_scenario`` wrote."""

    run_id: str
    out: Path
    written_as: WrittenAs
    source: dict[str, Any]  # the run's model source
    steps: int | None = None  # a scenario written from a cassette: its steps
    exchanges: int | None = None  # a cassette: its recorded requests

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "out": str(self.out),
            "as": self.written_as,
            "model_source": self.source,
            "steps": self.steps,
            "exchanges": self.exchanges,
        }


def run_model_source(record: RunRecord, opening: list[LogEntry]) -> dict[str, Any] | None:
    """The run's model source: ``runs.request``'s (a resume may change it), else its ``_baton/run_started``'s."""
    request = record.request if isinstance(record.request, dict) else {}
    source = request.get("model_source")
    if not isinstance(source, Mapping):
        for entry in opening:
            if entry["method"] == "_baton/run_started":
                source = (entry["payload"].get("params") or {}).get("model_source")
                break
    return dict(source) if isinstance(source, Mapping) else None


async def record_scenario(
    record: RunRecord,
    opening: list[LogEntry],
    out: Path,
    *,
    written_as: WrittenAs | None = None,
    force: bool = False,
) -> RecordedScenario:
    """Write run ``record`` (its first log entries in ``opening``) to ``out`` as a cassette or a scenario.

    ``written_as`` None: a scenario for an ``out`` ending in ``.yaml``/``.yml``, a cassette for
    ``.jsonl``, else what the run has (its cassette, else its scenario).
    """
    if written_as not in (None, "cassette", "scenario"):
        raise UsageError("invalid_argument", f"--as is cassette or scenario, not {written_as!r}")
    out = Path(out)
    if out.exists() and not force:
        raise RefusedError("output_exists", f"{out} exists; pass --force to overwrite it")
    if out.is_dir():
        raise UsageError("invalid_argument", f"--out {out} is a directory")
    source = run_model_source(record, opening)
    cassette = _cassette_of(record.id, source)
    scenario = _scenario_of(source) if cassette is None else None
    kind = written_as or _default_kind(out, cassette is not None)
    if kind == "cassette":
        if cassette is None:
            raise _not_recorded(record.id, source, want_cassette=True)
        return await asyncio.to_thread(_write_cassette, record, cassette, out, source or {})
    if cassette is not None:
        return await asyncio.to_thread(_write_from_cassette, record, cassette, out, source or {})
    if scenario is None:
        raise _not_recorded(record.id, source, want_cassette=False)
    return await asyncio.to_thread(_write_scenario_copy, record, scenario, out, source or {})


def run_cassette(record: RunRecord, opening: list[LogEntry]) -> Path:
    """The cassette file a run recorded or replayed (``GET /v1/runs/{id}/cassette``); ``run_not_recorded``
    for a run that has none, or whose file is gone."""
    source = run_model_source(record, opening)
    cassette = _cassette_of(record.id, source)
    if cassette is None:
        raise _not_recorded(record.id, source, want_cassette=True)
    return cassette


def _cassette_of(run_id: str, source: Mapping[str, Any] | None) -> Path | None:
    """The cassette a run recorded or replayed, None when it has none; ``run_not_recorded`` when it is gone."""
    if source is None:
        return None
    value = source.get("record") if isinstance(source.get("record"), str) else None
    if value is None and source.get("kind") == "cassette" and isinstance(source.get("cassette"), str):
        value = source["cassette"]
    if value is None:
        return None
    path = Path(str(value))
    if not path.is_file():
        raise RefusedError(
            "run_not_recorded",
            f"run {run_id}'s cassette {path} is gone: its model traffic is nowhere else",
            details={"cassette": str(path)},
        )
    return path


def _scenario_of(source: Mapping[str, Any] | None) -> str | None:
    if source is not None and source.get("kind") == "scenario" and isinstance(source.get("scenario"), str):
        return str(source["scenario"])
    return None


def _default_kind(out: Path, has_cassette: bool) -> WrittenAs:
    if out.suffix in (".yaml", ".yml"):
        return "scenario"
    if out.suffix == ".jsonl":
        return "cassette"
    return "cassette" if has_cassette else "scenario"


def _not_recorded(run_id: str, source: Mapping[str, Any] | None, *, want_cassette: bool) -> RefusedError:
    scenario = _scenario_of(source)
    if scenario is not None and want_cassette:
        message = (
            f"run {run_id} ran on the scenario {scenario} without --record: its model traffic was not kept "
            "(--as scenario writes the scenario; run it again with --record FILE for a cassette)"
        )
    elif source is None:
        message = f"run {run_id} records no model source (an older baton): nothing of its model's answers was kept"
    else:
        url = source.get("url") or "the provider's default endpoint"
        message = (
            f"run {run_id} ran on a real model endpoint ({url}) without --record: its model's answers "
            "were not kept; run the task again with --record FILE"
        )
    return RefusedError("run_not_recorded", message, details={"model_source": dict(source or {})})


def _write_cassette(record: RunRecord, cassette: Path, out: Path, source: dict[str, Any]) -> RecordedScenario:
    from baton.cassettes import load_cassette

    loaded = load_cassette(cassette)  # cassette_invalid for anything that is not one
    _write_atomically(out, cassette.read_bytes())
    return RecordedScenario(record.id, out, "cassette", source, exchanges=len(loaded.exchanges))


def _write_from_cassette(record: RunRecord, cassette: Path, out: Path, source: dict[str, Any]) -> RecordedScenario:
    from baton.cassettes import load_cassette
    from baton.testing import scenario_from_cassette

    loaded = load_cassette(cassette)
    prompt = record.request.get("prompt") if isinstance(record.request, dict) else None
    comment = (
        f"{out.stem}: written by `baton record-scenario {record.id}` from the cassette {cassette}\n"
        f"(agent {record.agent}, recorded {loaded.recorded_at or 'at an unknown time'}); the model's answers in order."
    )
    description = f"Run {record.id} ({record.agent})" + (f": {_one_line(prompt)}" if isinstance(prompt, str) else "")
    text, steps = scenario_from_cassette(loaded, comment=comment, description=description)
    _write_atomically(out, text.encode("utf-8"))
    return RecordedScenario(record.id, out, "scenario", source, steps=steps, exchanges=len(loaded.exchanges))


def _write_scenario_copy(record: RunRecord, scenario: str, out: Path, source: dict[str, Any]) -> RecordedScenario:
    from baton.testing import load_scenario, scenario_text

    text = scenario_text(scenario)
    steps = len(load_scenario(scenario).steps)  # what is copied loads
    head = f"# written by `baton record-scenario {record.id}`: the scenario {scenario} the run played\n"
    _write_atomically(out, (head + text).encode("utf-8"))
    return RecordedScenario(record.id, out, "scenario", source, steps=steps)


def _write_atomically(out: Path, data: bytes) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        Path(temporary).replace(out)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 100 else line[:99] + "…"
