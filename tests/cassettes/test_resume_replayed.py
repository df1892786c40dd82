"""A resume records on and replays on (baton.runs.resumed_cassettes), with the real Claude Code.

A run recorded through the model proxy (the scripted ``gate-park`` scenario standing in for the
real endpoint) parks on its gate; approved and resumed, it appends its resume's traffic to the
same cassette. Replayed with no endpoint and no key, the run parks on the same gate, and its
resume replays the rest of the cassette (not the configured endpoint): the same events and
tree. Resumed again once it ended, nothing is left to replay: ``cassette_exhausted``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.cassettes.test_agents_record_replay import _comparable, _settings, _tree
from tests.conftest import make_git_repo

from baton.cassettes import load_cassette
from baton.config import Settings
from baton.errors import RefusedError
from baton.runs import Baton, RunSpec
from baton.runs.queries import Runs
from baton.testing import answered_in

pytestmark = [pytest.mark.claude, pytest.mark.slow(seconds=60)]


async def _park_approve_resume(settings: Settings, spec: RunSpec) -> tuple[Any, list[Any], dict[str, str]]:
    """Start the run, let it park on its gate, approve the gate, resume the run and wait for its end."""
    async with Baton(settings) as baton:
        handle = await baton.start(spec)
        parked = await asyncio.wait_for(handle.wait(through_parks=False), 60)
        assert parked.status == "paused", parked
        gate = await baton.gate(str(parked.gate_id))
        await gate.approve()
        resumed = await baton.resume(parked.run_id)  # here, as `baton resume RUN` does
        outcome = await asyncio.wait_for(resumed.wait(), 60)
        events = await baton.queries.runner_events(outcome.run_id)
        record = await baton.store.get_run(outcome.run_id)
    paths = {str(spec.repo.resolve()): "<workspace>", str(settings.run_dir(outcome.run_id)): "<run-dir>"}
    comparable = [_comparable(e, paths) for e in events if e["type"] != "snapshot.captured"]
    return outcome, comparable, {"request": json.dumps(record.request), **_tree(spec.repo)}


def _ordered(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events if e["type"] != "gate.resolved" and e not in _said_events(events)]


def _said_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "message" and e["data"].get("role") == "user"]


def _said(events: list[dict[str, Any]]) -> list[str]:
    return [str(e["data"]["text"]) for e in _said_events(events)]


def _commands(events: list[dict[str, Any]]) -> list[tuple[str, Any, Any]]:
    data = [(e["type"], e["data"]) for e in events if e["type"].startswith("command.")]
    return [(kind, fields.get("command"), fields.get("exit_code")) for kind, fields in data]


async def test_a_parked_recorded_run_records_its_resume_and_its_replay_resumes_on_the_cassette(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "gate.cassette.jsonl"
    recording_settings = replace(_settings(tmp_path, "home-1"), gate_grace_seconds=0.0)
    first = make_git_repo(tmp_path / "first", {"README.md": "# a repository\n"})
    recorded, recorded_events, recorded_tree = await _park_approve_resume(
        recording_settings, RunSpec(prompt="go", repo=first, scenario="gate-park", record=cassette)
    )
    assert recorded.status == "finished", recorded
    assert "Resumed after the decision" in (recorded.result or "")
    # The resume's requests were appended: after the park's, in one file with one header.
    loaded = load_cassette(cassette)
    asked = [e for e in loaded.exchanges if e.body and e.body.get("tools")]
    assert len(asked) >= 2 and cassette.read_text().count('"baton_cassette"') == 1
    assert [e.seq for e in sorted(loaded.exchanges, key=lambda e: e.seq)] == list(range(len(loaded.exchanges)))
    assert json.loads(recorded_tree.pop("request"))["model_source"]["record"] == str(cassette)  # still recording

    replay_settings = replace(_settings(tmp_path, "home-2"), gate_grace_seconds=0.0)
    assert replay_settings.anthropic_api_key is None  # the resume cannot fall back on an endpoint
    second = make_git_repo(tmp_path / "second", {"README.md": "# a repository\n"})
    replayed, replayed_events, replayed_tree = await _park_approve_resume(
        replay_settings, RunSpec(prompt="go", repo=second, replay=cassette)
    )
    assert replayed.status == "finished", replayed
    assert replayed.result == recorded.result
    # On resume Claude runs the deferred call at once: the gate's resolution and the command race
    # baton's logging of the continuation prompt, so the user's messages are compared on their own.
    assert _ordered(replayed_events) == _ordered(recorded_events)
    assert _said(replayed_events) == _said(recorded_events) and len(_said(recorded_events)) == 2
    assert [e["type"] for e in replayed_events].count("gate.resolved") == 1
    assert _commands(replayed_events) == _commands(recorded_events)
    assert ("command.finished", "touch approved.txt", 0) in _commands(recorded_events)
    assert json.loads(replayed_tree.pop("request"))["model_source"]["kind"] == "cassette"
    assert replayed_tree == recorded_tree and "approved.txt" in replayed_tree
    journal = replay_settings.run_dir(replayed.run_id) / "cassette-answered.jsonl"
    assert {e.position for e in asked} <= answered_in(journal, cassette)  # every task request, once

    # The recorded run made a scenario: its resume's step waits for the prompt Claude Code resumes with.
    async with Runs(recording_settings) as runs:
        written = await runs.record_scenario(recorded.run_id, tmp_path / "gate.yaml")
    assert written.steps == len(asked)
    assert "prompt_contains: Continue from where you left off." in written.out.read_text()
    third = make_git_repo(tmp_path / "third", {"README.md": "# a repository\n"})
    scripted, scripted_events, scripted_tree = await _park_approve_resume(
        replace(_settings(tmp_path, "home-3"), gate_grace_seconds=0.0),
        RunSpec(prompt="go", repo=third, scenario=str(written.out)),
    )
    assert scripted.status == "finished" and scripted.result == recorded.result, scripted
    assert _ordered(scripted_events) == _ordered(recorded_events) and _commands(scripted_events) == _commands(
        recorded_events
    )
    scripted_tree.pop("request")
    assert scripted_tree == recorded_tree

    async with Baton(replay_settings) as baton:
        with pytest.raises(RefusedError) as exhausted:
            await baton.resume(replayed.run_id, "and now something else")
        assert len(await baton.store.list_runs()) == 1  # refused before a run was made
    assert exhausted.value.code == "cassette_exhausted" and str(cassette) in exhausted.value.message
