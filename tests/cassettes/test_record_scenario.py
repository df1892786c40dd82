"""``baton record-scenario``: a run of the real Claude Code and of Codex (an ACP subprocess agent),
recorded against the scripted model, made into a scenario file and a cassette; the scenario,
run again with ``--scenario FILE``, and the cassette, replayed, give the same runner events and
tool calls in the same order. Runs whose model answers were not kept are refused."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from tests.cassettes.test_agents_record_replay import PROMPT, RULES, _run, _settings
from tests.cli._baton_cli import invoke_in_process
from tests.conftest import make_git_repo

from baton.config import Settings
from baton.runs import RunSpec
from baton.testing import load_scenario

pytestmark = [pytest.mark.claude, pytest.mark.slow(seconds=60)]


def _calls(events: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """The event types in order, a tool call's with its title and kind."""
    shown = []
    for event in events:
        if event["type"] == "snapshot.captured":
            continue  # taken beside the stream: where it falls is timing's
        data = event.get("data") or {}
        detail = (data.get("title"), data.get("kind")) if event["type"].startswith("tool.") else None
        shown.append((event["type"], detail))
    return shown


async def _record(monkeypatch: pytest.MonkeyPatch, home: Path, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    invocation = await asyncio.to_thread(invoke_in_process, monkeypatch, home, "record-scenario", *args, "--json")
    stdout = json.loads(invocation.stdout) if invocation.returncode == 0 else None
    return invocation.returncode, stdout, invocation.stderr


@pytest.mark.parametrize("agent", ["claude", "codex"])
async def test_a_recorded_run_becomes_a_scenario_and_a_cassette_that_play_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent: str
) -> None:
    cassette = tmp_path / "seen-once.cassette.jsonl"
    settings = _settings(tmp_path, "home")
    first = make_git_repo(tmp_path / "first", {"README.md": "# a repository\n"})
    recorded, recorded_events, recorded_tree = await _run(
        settings, RunSpec(prompt=PROMPT, repo=first, scenario="write-and-run", record=cassette, **RULES, agent=agent)
    )
    assert recorded.status == "finished", recorded

    scenario_file = tmp_path / "tests" / "seen-once.yaml"
    code, wrote, stderr = await _record(monkeypatch, settings.home, recorded.run_id, "--out", str(scenario_file))
    assert code == 0, stderr
    assert wrote is not None and wrote["as"] == "scenario" and wrote["steps"] == 3, wrote
    scenario = load_scenario(str(scenario_file))  # baton's loader reads what was written
    assert [tool.name for step in scenario.steps for tool in step.tool_calls] == ["Write", "Bash"]
    assert "{cwd}/hello.txt" in scenario_file.read_text()  # the recorded workspace is a placeholder

    second = make_git_repo(tmp_path / "second", {"README.md": "# a repository\n"})
    again, again_events, again_tree = await _run(
        _settings(tmp_path, "home-2"),
        RunSpec(prompt=PROMPT, repo=second, scenario=str(scenario_file), **RULES, agent=agent),
    )
    assert again.status == "finished", again
    assert _calls(again_events) == _calls(recorded_events)
    assert again_tree.pop("request")["model_source"] == {"kind": "scenario", "scenario": str(scenario_file)}
    recorded_tree.pop("request")
    assert again_tree == recorded_tree

    copy = tmp_path / "tests" / "seen-once.jsonl"
    code, wrote, stderr = await _record(monkeypatch, settings.home, recorded.run_id, "--out", str(copy))
    assert code == 0, stderr
    assert wrote is not None and wrote["as"] == "cassette" and wrote["exchanges"] >= 3
    third = make_git_repo(tmp_path / "third", {"README.md": "# a repository\n"})
    replayed, replayed_events, _ = await _run(
        _settings(tmp_path, "home-3"), RunSpec(prompt=PROMPT, repo=third, replay=copy, **RULES, agent=agent)
    )
    assert replayed.status == "finished", replayed
    assert _calls(replayed_events) == _calls(recorded_events)

    # Made again from the replayed run (its cassette is the copy): the same scenario.
    code, wrote, stderr = await _record(
        monkeypatch, _settings(tmp_path, "home-3").home, replayed.run_id, "--out", str(tmp_path / "from-replay.yaml")
    )
    assert code == 0, stderr
    assert load_scenario(str(tmp_path / "from-replay.yaml")).steps == scenario.steps


async def test_runs_whose_model_answers_were_not_kept_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(tmp_path, "home")
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# a repository\n"})
    on_scenario, _, _ = await _run(settings, RunSpec(prompt="go", repo=repo, scenario="plain"))
    assert on_scenario.status == "finished", on_scenario
    out = tmp_path / "out.jsonl"

    code, _, stderr = await _record(monkeypatch, settings.home, "run_nope", "--out", str(out))
    assert code == 1 and json.loads(stderr)["error"]["code"] == "run_not_found"

    # A scenario run without --record: its scenario, but no cassette.
    code, _, stderr = await _record(monkeypatch, settings.home, on_scenario.run_id, "--out", str(out))
    error = json.loads(stderr)["error"]
    assert code == 3 and error["code"] == "run_not_recorded" and "--as scenario" in error["message"], stderr
    assert not out.exists()
    copied = tmp_path / "plain-copy.yaml"
    code, wrote, stderr = await _record(monkeypatch, settings.home, on_scenario.run_id, "--out", str(copied))
    assert code == 0 and wrote is not None and wrote["as"] == "scenario", stderr
    assert load_scenario(str(copied)).steps == load_scenario("plain").steps

    # An existing --out is kept unless --force.
    code, _, stderr = await _record(monkeypatch, settings.home, on_scenario.run_id, "--out", str(copied))
    assert code == 3 and json.loads(stderr)["error"]["code"] == "output_exists"
    code, _, stderr = await _record(monkeypatch, settings.home, on_scenario.run_id, "--out", str(copied), "--force")
    assert code == 0, stderr

    # A run on a real endpoint (here the scripted server behind a configured URL and key) without --record.
    from baton.testing import ScriptedModelServer

    with ScriptedModelServer("plain") as server:
        environ = {
            "BATON_HOME": str(settings.home),
            "PATH": os.environ.get("PATH", ""),
            "BATON_WORKSPACE": "in-place",
            "ANTHROPIC_BASE_URL": server.base_url,
            "ANTHROPIC_API_KEY": "sk-test-endpoint-key",
        }
        on_endpoint, _, _ = await _run(Settings.load(environ), RunSpec(prompt="go", repo=repo))
    assert on_endpoint.status == "finished", on_endpoint
    code, _, stderr = await _record(monkeypatch, settings.home, on_endpoint.run_id, "--out", str(out))
    error = json.loads(stderr)["error"]
    assert code == 3 and error["code"] == "run_not_recorded" and "real model endpoint" in error["message"], stderr
    assert error["details"]["model_source"]["kind"] == "endpoint"

    # A recorded run whose cassette was deleted.
    cassette = tmp_path / "gone.jsonl"
    recorded, _, _ = await _run(settings, RunSpec(prompt="go", repo=repo, scenario="plain", record=cassette))
    assert recorded.status == "finished" and cassette.is_file()
    cassette.unlink()
    code, _, stderr = await _record(monkeypatch, settings.home, recorded.run_id, "--out", str(out))
    error = json.loads(stderr)["error"]
    assert code == 3 and error["code"] == "run_not_recorded" and "is gone" in error["message"], stderr


def test_baton_run_takes_a_relative_scenario_file_and_records_it_absolute(tmp_path: Path) -> None:
    from tests.cli._baton_cli import BatonCLI
    from tests.cli.test_model_source_cli import run_request

    (tmp_path / "mine.yaml").write_text("description: mine\nsteps:\n  - text: From a file of my own.\n")
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# a repository\n"})
    baton = BatonCLI(tmp_path / "home")
    ran = baton.finish(baton.start("run", "go", "--repo", str(repo), "--scenario", "mine.yaml", "--json", cwd=tmp_path))
    assert ran.returncode == 0, ran.describe()
    assert ran.json_lines()[-1]["data"]["result"] == "From a file of my own."
    run_id = ran.json_lines()[0]["run_id"]
    recorded = run_request(baton.home, run_id)["model_source"]
    assert recorded == {"kind": "scenario", "scenario": str(tmp_path / "mine.yaml")}
    missing = baton("run", "go", "--repo", str(repo), "--scenario", "nowhere/none.yaml", "--json")
    assert missing.returncode == 2 and json.loads(missing.stderr)["error"]["code"] == "invalid_argument"
