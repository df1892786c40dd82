"""``baton runs``, ``baton show`` and ``baton resume``'s refusals, through the command's entry point.

The runs are real rows in a fresh ``BATON_HOME``: one finished, one recorded as running by a
process that is gone (shown as ``interrupted``), one running in this very process (alive).
Killing a real run and resuming it with ``baton resume`` is in tests/runs/test_resume_claude.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.cli._baton_cli import invoke_in_process

from baton.config import Settings
from baton.runs.executors import this_executor_id
from baton.store import Redactor, SessionLog, Store

RunIds = dict[str, str]


async def make_runs(home: Path, repo: Path) -> RunIds:
    home.mkdir(parents=True, exist_ok=True)
    settings = Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": str(home)})
    async with Store.open(settings.resolved_database_url) as store, SessionLog(store, Redactor()) as log:
        ids: RunIds = {}
        for name in ("finished", "dead", "alive", "empty"):
            record = await store.create_run(
                agent="claude", permission_mode="acceptEdits", repo=str(repo), cwd=str(repo)
            )
            ids[name] = record.id
        await store.update_run(ids["finished"], status="running", status_reason="started")
        await store.update_run(ids["finished"], status="finished", status_reason="end_turn", total_cost_usd=0.25)
        gone = this_executor_id().rsplit(":", 1)[0] + ":1"  # this pid, another start time: a reused pid
        await store.update_run(ids["dead"], status="running", status_reason="started", executor_id=gone)
        log.open_run(ids["dead"])
        started = {"run_id": ids["dead"], "agent": "claude", "cwd": str(repo), "prompt": "go"}
        log.append(
            ids["dead"],
            "baton",
            "_baton/run_started",
            {"jsonrpc": "2.0", "method": "_baton/run_started", "params": started},
        )
        await store.update_run(ids["alive"], status="running", status_reason="started", executor_id=this_executor_id())
    return ids


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "baton-home"


@pytest.fixture
def runs(home: Path, repo: Path) -> RunIds:
    return asyncio.run(make_runs(home, repo))


def test_runs_on_an_empty_home(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    listed = invoke_in_process(monkeypatch, home, "runs", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
    plain = invoke_in_process(monkeypatch, home, "runs")
    assert plain.stdout == "no runs\n"


def test_runs_json_gives_design_run_objects_with_dead_executors_as_interrupted(
    monkeypatch: pytest.MonkeyPatch, home: Path, runs: RunIds, repo: Path
) -> None:
    listed = invoke_in_process(monkeypatch, home, "runs", "--json")
    assert listed.returncode == 0, listed.describe()
    objects = json.loads(listed.stdout)
    assert [run["id"] for run in objects] == [runs["finished"], runs["dead"], runs["alive"], runs["empty"]]
    assert set(objects[0]) == {
        "id",
        "task_id",
        "agent",
        "model",
        "permission_mode",
        "run_mode",
        "status",
        "status_reason",
        "created_at",
        "finished_at",
        "total_cost_usd",
        "error_code",
        "error_message",
        "repo",
        "workspace",
    }
    by_id = {run["id"]: run for run in objects}
    assert (by_id[runs["finished"]]["status"], by_id[runs["finished"]]["total_cost_usd"]) == ("finished", 0.25)
    assert (by_id[runs["dead"]]["status"], by_id[runs["dead"]]["status_reason"]) == ("interrupted", "executor_dead")
    assert (by_id[runs["alive"]]["status"], by_id[runs["alive"]]["status_reason"]) == ("running", "started")
    assert by_id[runs["alive"]]["repo"] == str(repo)

    only = invoke_in_process(monkeypatch, home, "runs", "--status", "interrupted", "--json")
    assert [run["id"] for run in json.loads(only.stdout)] == [runs["dead"]]

    wide = invoke_in_process(monkeypatch, home, "runs", env={"COLUMNS": "200"}).stdout.splitlines()
    assert wide[0].split() == ["ID", "STATUS", "AGENT", "CREATED", "COST", "REPO", "PROMPT"]
    rows = {line.split()[0]: line.split() for line in wide[1:]}  # CREATED is a date and a time
    assert rows[runs["finished"]][1:3] == ["finished", "claude"] and rows[runs["finished"]][5:] == [
        "$0.2500",
        str(repo),
        "-",
    ]
    assert rows[runs["dead"]][1] == "interrupted" and rows[runs["dead"]][5:] == ["-", str(repo), "go"]


AGENTS = ("claude", "codex", "gemini", "opencode", "claude-acp", "command")


async def make_runs_of_every_agent(home: Path, repo: Path) -> list[str]:
    home.mkdir(parents=True, exist_ok=True)
    settings = Settings.load({"BATON_WORKSPACE": "in-place", "BATON_HOME": str(home)})
    async with Store.open(settings.resolved_database_url) as store:
        task = await store.create_task("the task's own long prompt", title="Fix the flaky test", repo=str(repo))
        ids = []
        for number, agent in enumerate(AGENTS):
            prompt = f"Task {number}: make the failing test pass,\nthen explain what was wrong " + "at length " * 10
            record = await store.create_run(
                agent=agent,
                repo=str(repo),
                cwd=str(repo),
                task_id=task.id if agent == "gemini" else None,
                request={"prompt": prompt},
            )
            ids.append(record.id)
        await store.update_run(ids[1], status="running", status_reason="started")  # no executor: interrupted
        return ids


def test_runs_shows_each_prompt_aligned_for_every_agent_within_80_columns(
    monkeypatch: pytest.MonkeyPatch, home: Path, repo: Path
) -> None:
    ids = asyncio.run(make_runs_of_every_agent(home, repo))
    table = invoke_in_process(monkeypatch, home, "runs", env={"COLUMNS": "80"}).stdout.splitlines()
    assert table[0].split() == ["ID", "STATUS", "AGENT", "PROMPT"]
    assert all(len(line) <= 80 for line in table), table
    starts = [table[0].index(header) for header in ("STATUS", "AGENT", "PROMPT")]
    for line, run_id, agent in zip(table[1:], ids, AGENTS, strict=True):
        fields = line.split()
        assert fields[0] == run_id and fields[2] == agent
        assert [line.index(" " + field, len(run_id)) + 1 for field in fields[1:4]] == starts, (line, table[0])
    by_agent = dict(zip(AGENTS, (line[starts[2] :] for line in table[1:]), strict=True))
    assert by_agent["gemini"] == "Fix the flaky test"  # a run of a task shows the task's title
    assert by_agent["claude"].startswith("Task 0: make the") and by_agent["claude"].endswith("…")
    wide = invoke_in_process(monkeypatch, home, "runs", env={"COLUMNS": "300"}).stdout.splitlines()
    assert "Task 0: make the failing test pass, then explain what was wrong at length at length" in wide[1]
    assert table[2].split()[1] == "interrupted"


def test_runs_refuses_an_unknown_status(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    refused = invoke_in_process(monkeypatch, home, "runs", "--status", "sleeping", "--json")
    assert refused.returncode == 2 and refused.stdout == ""
    assert json.loads(refused.stderr)["error"]["code"] == "invalid_argument"


def test_show_gives_the_run_its_executor_and_its_transitions(
    monkeypatch: pytest.MonkeyPatch, home: Path, runs: RunIds, repo: Path
) -> None:
    shown = invoke_in_process(monkeypatch, home, "show", runs["dead"], "--json")
    assert shown.returncode == 0, shown.describe()
    body = json.loads(shown.stdout)
    assert body["id"] == runs["dead"] and body["status"] == "interrupted" and body["cwd"] == str(repo)
    assert body["executor_alive"] is False and body["executor_id"].startswith("local:")
    assert body["log_entries"] == 1 and body["resumed_from"] is None
    assert [(step["from_status"], step["to_status"]) for step in body["transitions"]] == [
        (None, "queued"),
        ("queued", "running"),
    ]
    alive = json.loads(invoke_in_process(monkeypatch, home, "show", runs["alive"], "--json").stdout)
    assert alive["executor_alive"] is True and alive["status"] == "running"

    plain = invoke_in_process(monkeypatch, home, "show", runs["finished"]).stdout
    assert f"id:                {runs['finished']}\n" in plain and "status:            finished\n" in plain
    assert "running → finished  end_turn" in plain


def test_show_of_an_unknown_run(monkeypatch: pytest.MonkeyPatch, home: Path, runs: RunIds) -> None:
    missing = invoke_in_process(monkeypatch, home, "show", "run_nope")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr == "baton: run_not_found: no run run_nope\n"


def test_resume_refuses_a_live_run_an_ended_run_without_prompt_and_an_unknown_run(
    monkeypatch: pytest.MonkeyPatch, home: Path, runs: RunIds
) -> None:
    active = invoke_in_process(monkeypatch, home, "resume", runs["alive"], "--json")
    assert active.returncode == 3 and active.stdout == ""
    error = json.loads(active.stderr)["error"]
    assert error["code"] == "run_active" and this_executor_id() in error["message"]

    ended = invoke_in_process(monkeypatch, home, "resume", runs["finished"])
    assert ended.returncode == 3
    assert ended.stderr.startswith("baton: run_ended: ") and "give a PROMPT" in ended.stderr

    unknown = invoke_in_process(monkeypatch, home, "resume", "run_nope", "--json")
    assert unknown.returncode == 1 and json.loads(unknown.stderr)["error"]["code"] == "run_not_found"

    # A run of which nothing was recorded cannot be resumed: its task is unknown.
    empty = invoke_in_process(monkeypatch, home, "resume", runs["empty"], "--json")
    assert empty.returncode == 3 and json.loads(empty.stderr)["error"]["code"] == "run_not_resumable"

    # A dead run passes those checks; without credentials it is refused before anything changes.
    no_key = invoke_in_process(monkeypatch, home, "resume", runs["dead"], "--json")
    assert no_key.returncode == 3 and json.loads(no_key.stderr)["error"]["code"] == "model_credentials_missing"
    still = json.loads(invoke_in_process(monkeypatch, home, "show", runs["dead"], "--json").stdout)
    assert still["executor_id"] != this_executor_id() and still["status"] == "interrupted"
