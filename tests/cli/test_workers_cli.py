"""Runs across processes: concurrent ``baton run``s, ``baton worker`` adopting a dead run, a resume
right after a SIGKILL (with a changed workflow source), ``workspace_busy`` between processes, and
``baton logs --follow`` across a crash. Real processes, the real Claude Code, the scripted model.

Processes that must share one model server (the killed run and whoever continues it) get the
endpoint of a scripted server running in this test, as in tests/runs/test_resume_crash.py.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.cli._baton_cli import REPO_ROOT, BatonCLI, Started, baton_command, invoke_in_process, until_event
from tests.conftest import make_git_repo
from tests.runs.test_resume_crash import FILES, committed, kill_whole_run, log_entries, run_status

from baton.agents.processes import run_process_ids
from baton.events.project import project
from baton.runs.workflows import APPLICATION_VERSION
from baton.store import Store
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.claude

MODEL_KEY = "sk-scripted-workers-key-0123456789abcdef"
THREE_STEPS = ("--mode", "acceptEdits", "--allow", "Bash(echo:*)", "--allow", "Bash(sleep:*)", "--json")


@pytest.fixture
def shared_model(baton: BatonCLI) -> Iterator[ScriptedModelServer]:
    """One scripted server for every process of the test (``three-steps``)."""
    with ScriptedModelServer("three-steps") as server:
        baton.env["ANTHROPIC_BASE_URL"] = server.base_url
        baton.env["ANTHROPIC_API_KEY"] = MODEL_KEY
        yield server


def workflows(home: Path) -> list[tuple[str, str, str, str]]:
    with sqlite3.connect(home / "dbos.sqlite") as connection:
        return [
            (str(row[0]), str(row[1]), str(row[2]), str(row[3]))
            for row in connection.execute(
                "SELECT workflow_uuid, status, executor_id, application_version FROM workflow_status "
                "ORDER BY created_at"
            )
        ]


def agent_processes(run_ids: list[str]) -> dict[str, int]:
    """Per run, its agents: processes carrying its BATON_RUN_ID whose parent does not (the
    agent's tools run under it and carry the variable too). One pass over /proc."""
    markers = {f"BATON_RUN_ID={run_id}".encode(): run_id for run_id in run_ids}
    parents: dict[str, dict[int, int]] = {run_id: {} for run_id in run_ids}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z":
            continue
        for variable in environ:
            if variable in markers:
                parents[markers[variable]][int(entry.name)] = int(fields[1])
    return {run_id: sum(1 for parent in found.values() if parent not in found) for run_id, found in parents.items()}


def kill_after(home: Path, started: Started, entries: int) -> str:
    """SIGKILL the whole run once ``entries`` log entries are committed; the run's id."""
    _, process = started
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run_id, last = committed(home / "baton.db")
        if run_id is not None and last >= entries:
            break
        assert process.poll() is None, "the run ended before the kill"
        time.sleep(0.005)
    assert run_id is not None
    kill_whole_run(process, run_id)
    return run_id


@pytest.mark.slow(seconds=15)  # three processes, two runs; one worker test stays in every run
@pytest.mark.timeout(300)
def test_two_concurrent_runs_and_readers_in_a_third_process(baton: BatonCLI, tmp_path: Path) -> None:
    repos = [make_git_repo(tmp_path / f"repo-{index}", {"README.md": "# two\n"}) for index in range(2)]
    running = [
        baton.start("run", "go", "--repo", str(repo), "--scenario", "three-steps", *THREE_STEPS) for repo in repos
    ]
    try:
        run_ids = [until_event(started, "task.started")["run_id"] for started in running]
        most = dict.fromkeys(run_ids, 0)

        def sample() -> None:  # the OS's view, while the readers below run
            while any(process.poll() is None for _, process in running):
                for run_id, count in agent_processes(run_ids).items():
                    most[run_id] = max(most[run_id], count)
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        listed = baton("runs", "--json")  # a third process reads while both execute
        logged = baton("logs", run_ids[0], "--view", "acp", "--json")
        sampler.join(timeout=90)
        ended = [baton.finish(started) for started in running]
    finally:
        baton.stop(running)
    assert [one.returncode for one in ended] == [0, 0], [one.describe() for one in ended]
    assert listed.returncode == 0 and {run["id"] for run in json.loads(listed.stdout)} == set(run_ids)
    assert logged.returncode == 0 and logged.json_lines()[0]["method"] == "_baton/run_started"
    assert most == dict.fromkeys(run_ids, 1)  # exactly one agent per run, seen by the OS
    for run_id in run_ids:
        events = baton("logs", run_id, "--view", "events").json_lines()
        assert [event["type"] for event in events].count("task.started") == 1
        assert events[-1]["type"] == "task.finished"
    rows = workflows(baton.home)
    assert sorted(row[0] for row in rows) == sorted(f"{run_id}:1" for run_id in run_ids)
    assert {row[1] for row in rows} == {"SUCCESS"}
    assert len({row[2] for row in rows}) == 2  # one executor id per process


@pytest.mark.slow  # the claim itself: tests/store/test_store_workspaces.py, every run
def test_a_second_run_in_a_busy_workspace_is_refused_from_another_process(baton: BatonCLI, repo: Path) -> None:
    first = baton.start("run", "first", "--repo", str(repo), "--scenario", "plain", "--interactive", "--json")
    try:
        run_id = until_event(first, "task.started")["run_id"]
        second = baton("run", "second", "--repo", str(repo), "--scenario", "plain", "--json")
        closed = baton("close", run_id)
        ended = baton.finish(first, timeout=40)
    finally:
        baton.stop([first])
    assert second.returncode == 3, second.describe()
    error = json.loads(second.stderr)["error"]
    assert error["code"] == "workspace_busy" and run_id in error["message"]
    assert closed.returncode == 0 and ended.returncode == 0, ended.describe()
    assert [run["id"] for run in json.loads(baton("runs", "--json").stdout)] == [run_id]  # nothing recorded


@pytest.mark.slow
def test_a_killed_run_resumes_at_once_with_a_changed_workflow_source(
    baton: BatonCLI, repo: Path, tmp_path: Path, shared_model: ScriptedModelServer
) -> None:
    """SIGKILL, then ``baton resume`` at once (no run_active, no timeout) by a baton whose workflow
    module changed: the pinned application version keeps the run going."""
    run_id = kill_after(baton.home, baton.start("run", "go", "--repo", str(repo), *THREE_STEPS), 12)
    # The run shows as interrupted to any process, right away.
    listed = {run["id"]: run for run in json.loads(baton("runs", "--json").stdout)}
    assert listed[run_id]["status"] == "interrupted"
    changed = tmp_path / "changed-src"
    shutil.copytree(REPO_ROOT / "src" / "baton", changed / "baton")
    marker = tmp_path / "changed-workflow-ran"
    module = changed / "baton" / "runs" / "workflows.py"
    source = module.read_text()
    patched = source.replace(
        "async def _run_workflow(run_id: str) -> dict[str, Any]:\n",
        "async def _run_workflow(run_id: str) -> dict[str, Any]:\n"
        f"    Path({str(marker)!r}).write_text(run_id)  # a changed workflow body\n",
    )
    assert patched != source
    module.write_text(patched)
    resumed = subprocess.run(
        [*baton_command(), "resume", run_id, "--json"],
        env=dict(baton.env, PYTHONPATH=str(changed)),  # this baton imports the changed copy
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert marker.read_text() == run_id  # the changed workflow ran
    assert run_status(baton.home / "baton.db", run_id) == "finished"
    for name, text in FILES.items():
        assert (repo / name).read_text() == text
    rows = [row for row in workflows(baton.home) if row[0].startswith(run_id)]
    assert [(row[0], row[1], row[3]) for row in rows] == [
        (f"{run_id}:1", "CANCELLED", APPLICATION_VERSION),  # the dead attempt: nothing may recover it
        (f"{run_id}:2", "SUCCESS", APPLICATION_VERSION),
    ]
    assert rows[0][2] != rows[1][2]


@pytest.mark.slow
def test_logs_follow_in_another_process_prints_only_stored_entries_across_a_crash(
    baton: BatonCLI, repo: Path, shared_model: ScriptedModelServer
) -> None:
    running = baton.start("run", "go", "--repo", str(repo), *THREE_STEPS)
    run_id = until_event(running, "task.started")["run_id"]
    follower = baton.start("logs", run_id, "--follow", "--view", "acp", "--json")
    try:
        kill_after(baton.home, running, 20)
        followed = baton.finish(follower, timeout=30)  # ends by itself: the executor is gone
    finally:
        baton.stop([running, follower])
    printed = followed.json_lines()
    stored = {entry["seq"]: entry for entry in log_entries(baton.home / "baton.db", run_id)}
    assert printed, followed.describe()
    for entry in printed:
        kept = stored[entry["seq"]]
        assert (entry["method"], entry["direction"], entry["payload"]) == (
            kept["method"],
            kept["direction"],
            kept["payload"],
        )
    resumed = baton("resume", run_id, "--json")  # adoptable at once
    assert resumed.returncode == 0, resumed.describe()
    assert run_status(baton.home / "baton.db", run_id) == "finished"


def test_a_worker_adopts_a_dead_run_with_an_inbox_message(
    baton: BatonCLI, repo: Path, shared_model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = baton.start("run", "first", "--repo", str(repo), "--interactive", *THREE_STEPS)
    run_id = until_event(running, "turn.finished")["run_id"]
    kill_whole_run(running[1], run_id)
    # A message accepted an instant before the executing process died, never taken by it.
    asyncio.run(_put_message(baton.home, run_id, "second"))
    worker = baton.start("worker", "--interval", "0.2")
    try:
        _wait_for(lambda: _prompts(baton.home, run_id)[-1:] == ["second"] and _turns(baton.home, run_id) >= 3)
        closed = baton.here(monkeypatch, "close", run_id)  # the worker executes the run now: accepted
        _wait_for(lambda: run_status(baton.home / "baton.db", run_id) == "finished")
        worker[1].send_signal(signal.SIGTERM)
        stopped = baton.finish(worker, timeout=30)
    finally:
        baton.stop([worker])
    assert closed.returncode == 0, closed.describe()
    assert stopped.returncode == 0, stopped.describe()
    assert f"adopted run {run_id}" in stopped.stderr
    entries = log_entries(baton.home / "baton.db", run_id)
    resumes = [entry["payload"]["params"] for entry in entries if entry["method"] == "_baton/resume"]
    assert len(resumes) == 1 and resumes[0]["prompt"].startswith("[baton:resume]")
    prompts = _prompts(baton.home, run_id)
    assert prompts[0] == "first" and prompts[-1] == "second"
    types = [event["type"] for event in project(entries)]
    assert types.count("task.started") == 1 and types[-1] == "task.finished"
    assert not run_process_ids(run_id)


async def _put_message(home: Path, run_id: str, text: str) -> None:
    store = Store.open(f"sqlite:///{home / 'baton.db'}")
    try:
        await store.inbox_put(run_id, "user_message", {"content": text})
    finally:
        await store.aclose()


def _prompts(home: Path, run_id: str) -> list[str]:
    return [
        str(entry["payload"]["params"]["prompt"][0]["text"])
        for entry in log_entries(home / "baton.db", run_id)
        if entry["method"] == "session/prompt" and entry["direction"] == "to_agent"
    ]


def _turns(home: Path, run_id: str) -> int:
    return sum(1 for entry in log_entries(home / "baton.db", run_id) if entry["method"] == "_baton/turn_complete")


def _wait_for(condition: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_worker_adopts_a_parked_run_once_its_gate_is_decided(
    baton: BatonCLI, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``baton run --no-wait`` parks and exits (no process executes the run); a running worker
    leaves it alone while its gate is pending, and continues it once another process approves."""
    with ScriptedModelServer("gate-park") as server:
        baton.env.update(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY=MODEL_KEY, BATON_GATE_GRACE_SECONDS="1")
        parked = baton("run", "go", "--repo", str(repo), "--no-wait", "--json")
        assert parked.returncode == 4, parked.describe()
        run_id = parked.json_lines()[0]["run_id"]
        worker = baton.start("worker", "--interval", "0.1")
        try:
            assert worker[1].stderr is not None
            for line in worker[1].stderr:  # up and scanning
                if "scanning every" in line:
                    break
            else:
                pytest.fail("baton worker did not start")
            time.sleep(1)  # ten scans: a pending gate is no work
            assert run_status(baton.home / "baton.db", run_id) == "paused"
            [gate] = json.loads(baton.here(monkeypatch, "gates", "--status", "pending", "--json").stdout)
            approved = baton.here(monkeypatch, "approve", gate["id"])  # from another process than the worker
            assert approved.returncode == 0, approved.describe()
            _wait_for(lambda: run_status(baton.home / "baton.db", run_id) == "finished", timeout=90)
            worker[1].send_signal(signal.SIGTERM)
            stopped = baton.finish(worker, timeout=30)
        finally:
            baton.stop([worker])
    assert stopped.returncode == 0, stopped.describe()
    assert stopped.stderr.count(f"adopted run {run_id}") == 1, stopped.stderr
    assert (repo / "approved.txt").exists()
    events = baton.here(monkeypatch, "logs", run_id, "--view", "events").json_lines()
    assert [event["type"] for event in events].count("task.started") == 1
    assert events[-1]["type"] == "task.finished"
    assert not run_process_ids(run_id)


def test_a_worker_scanning_rarely_is_woken_by_a_decision_from_another_process(
    baton: BatonCLI, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker whose scans are ten minutes apart adopts a parked run at once when another
    process approves its gate: the decision's inbox row rings the worker's doorbell."""
    with ScriptedModelServer("gate-park") as server:
        baton.env.update(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY=MODEL_KEY, BATON_GATE_GRACE_SECONDS="1")
        parked = baton("run", "go", "--repo", str(repo), "--no-wait", "--json")
        assert parked.returncode == 4, parked.describe()
        run_id = parked.json_lines()[0]["run_id"]
        worker = baton.start("worker", "--interval", "600")
        try:
            assert worker[1].stderr is not None
            for line in worker[1].stderr:  # up, and its first scan (at start) found no work
                if "scanning every" in line:
                    break
            else:
                pytest.fail("baton worker did not start")
            [gate] = json.loads(baton.here(monkeypatch, "gates", "--status", "pending", "--json").stdout)
            approved = baton.here(monkeypatch, "approve", gate["id"])
            assert approved.returncode == 0, approved.describe()
            _wait_for(lambda: run_status(baton.home / "baton.db", run_id) == "finished", timeout=90)
            worker[1].send_signal(signal.SIGTERM)
            stopped = baton.finish(worker, timeout=30)
        finally:
            baton.stop([worker])
    assert stopped.returncode == 0, stopped.describe()
    assert stopped.stderr.count(f"adopted run {run_id}") == 1, stopped.stderr
    assert (repo / "approved.txt").exists()
    assert not run_process_ids(run_id)


def test_commands_that_only_read_never_launch_dbos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    for args in (("runs", "--json"), ("show", "run_nope"), ("logs", "run_nope"), ("send", "run_nope", "hi")):
        invoke_in_process(monkeypatch, home, *args)
    assert (home / "baton.db").exists()
    assert not (home / "dbos.sqlite").exists()  # DBOS's system database is created by launch only
