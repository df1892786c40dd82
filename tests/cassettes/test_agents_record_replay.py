"""The real Claude Code and Codex (an ACP subprocess agent) recorded through the model proxy
(the scripted model server standing in for the real endpoint), then replayed from the
cassette with no endpoint at all: the same runner events (ids, times, paths aside) and the
same final tree; a changed prompt fails the replay with ``replay_mismatch`` and a diff."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import make_git_repo

from baton.cassettes import load_cassette
from baton.config import Settings
from baton.runs import Baton, RunSpec

pytestmark = [pytest.mark.claude, pytest.mark.slow(seconds=60)]

PROMPT = "Create hello.txt and run echo hi"
RULES: dict[str, Any] = {"permission_mode": "acceptEdits", "allow": ("Bash(echo:*)",)}

_IDS = re.compile(
    r"\b(?:toolu|call|msg|req)_[A-Za-z0-9_-]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)
_VOLATILE = frozenset({"run_id", "seq", "log_seq", "ts", "raw", "duration_ms", "session_id", "id", "tool_call_id"})


def _settings(tmp_path: Path, name: str) -> Settings:
    import os

    environ = {"BATON_HOME": str(tmp_path / name), "PATH": os.environ.get("PATH", ""), "BATON_WORKSPACE": "in-place"}
    return Settings.load(environ)


def _comparable(value: Any, paths: dict[str, str]) -> Any:
    """An event with what differs between two runs of one conversation taken out."""
    if isinstance(value, dict):
        return {k: _comparable(v, paths) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_comparable(v, paths) for v in value]
    if isinstance(value, str):
        for path, name in paths.items():
            value = value.replace(path, name)
        return _IDS.sub("<id>", value)
    return value


def _tree(repo: Path) -> dict[str, str]:
    files = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "--others", "--cached", "--exclude-standard"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    return {name: (repo / name).read_text() for name in files}


async def _run(settings: Settings, spec: RunSpec) -> tuple[Any, list[Any], dict[str, str]]:
    async with Baton(settings) as baton:
        handle = await baton.start(spec)
        try:
            outcome = await asyncio.wait_for(handle.wait(), 30)
        except TimeoutError:
            for e in await baton.queries.runner_events(handle.run_id):
                print(e["type"], json.dumps(e["data"])[:300])
            raise
        events = await baton.queries.runner_events(outcome.run_id)
        paths = {str(spec.repo.resolve()): "<workspace>", str(settings.run_dir(outcome.run_id)): "<run-dir>"}
        record = await baton.store.get_run(outcome.run_id)
    return outcome, [_comparable(event, paths) for event in events], {"request": record.request, **_tree(spec.repo)}


@pytest.mark.parametrize("agent", ["claude", "codex"])
async def test_a_recorded_run_replays_offline_with_the_same_events_and_tree(tmp_path: Path, agent: str) -> None:
    cassette = tmp_path / "write-and-run.cassette.jsonl"
    first_repo = make_git_repo(tmp_path / "first", {"README.md": "# a repository\n"})
    recorded, recorded_events, recorded_tree = await _run(
        _settings(tmp_path, "home-1"),
        RunSpec(prompt=PROMPT, repo=first_repo, scenario="write-and-run", record=cassette, **RULES, agent=agent),
    )
    assert recorded.status == "finished", recorded

    loaded = load_cassette(cassette)
    assert loaded.paths.workspace == str(first_repo.resolve())
    assert len([e for e in loaded.exchanges if e.body and e.body.get("tools")]) >= 3  # Write, Bash, the final text
    text = cassette.read_text()  # neither the endpoint's key nor the agent's placeholder
    assert not re.search(r"scripted-[0-9a-f]{24}", text) and "sk-baton-placeholder" not in text

    second_repo = make_git_repo(tmp_path / "second", {"README.md": "# a repository\n"})
    replay_settings = _settings(tmp_path, "home-2")
    assert replay_settings.anthropic_api_key is None  # no endpoint, no key
    replayed, replayed_events, replayed_tree = await _run(
        replay_settings, RunSpec(prompt=PROMPT, repo=second_repo, replay=cassette, **RULES, agent=agent)
    )
    assert replayed.status == "finished", replayed
    # Snapshots are taken beside the stream, so where they fall among the events is timing's:
    # they are compared on their own.
    recorded_snapshots = [e for e in recorded_events if e["type"] == "snapshot.captured"]
    assert recorded_snapshots and recorded_snapshots == [e for e in replayed_events if e["type"] == "snapshot.captured"]
    recorded_events = [e for e in recorded_events if e["type"] != "snapshot.captured"]
    replayed_events = [e for e in replayed_events if e["type"] != "snapshot.captured"]
    assert [e["type"] for e in replayed_events] == [e["type"] for e in recorded_events]
    differing = [(a, b) for a, b in zip(recorded_events, replayed_events, strict=True) if a != b]
    # The only events allowed to differ are the run's start (its model source) and end (timing).
    assert all(a["type"] in ("task.started", "task.completed") for a, _ in differing), json.dumps(differing)[:3000]
    assert recorded_tree.pop("request")["model_source"] == {
        "kind": "scenario", "scenario": "write-and-run", "record": str(cassette)
    }  # fmt: skip
    assert replayed_tree.pop("request")["model_source"] == {
        "kind": "cassette",
        "cassette": str(cassette),
        "timing": "fast",
    }
    assert replayed_tree == recorded_tree and replayed_tree["hello.txt"] == "hello from baton\n"

    third_repo = make_git_repo(tmp_path / "third", {"README.md": "# a repository\n"})
    changed, _, _ = await _run(
        _settings(tmp_path, "home-3"),
        RunSpec(prompt="Create goodbye.txt instead", repo=third_repo, replay=cassette, **RULES, agent=agent),
    )
    assert changed.status == "failed" and changed.code == "replay_mismatch", changed
    assert changed.message is not None
    assert (
        f'-     "text": "{PROMPT}"' in changed.message
        and '+     "text": "Create goodbye.txt instead"' in changed.message
    )
