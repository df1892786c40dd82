"""``baton run --json`` and ``baton logs`` end to end: the real Claude Code, the scripted model.

Each run is a real ``baton`` process that starts Claude Code (bundled in claude-agent-sdk)
against ``--scenario``; stdout and stderr are checked separately.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.cli._baton_cli import BatonCLI, Invocation, Started, sample_repo
from tests.conftest import make_git_repo

pytestmark = pytest.mark.claude

EVENT_KEYS = {"run_id", "seq", "log_seq", "ts", "type", "data", "raw"}
ENTRY_KEYS = {"run_id", "seq", "ts", "direction", "method", "payload"}
EVENT_TYPES = {
    "setup.started",
    "setup.output",
    "setup.skipped",
    "setup.finished",
    "task.started",
    "message",
    "file.read",
    "file.changed",
    "command.started",
    "command.finished",
    "test.result",
    "gate.opened",
    "gate.resolved",
    "snapshot.captured",
    "turn.finished",
    "task.finished",
    "task.failed",
}
RFC3339_MILLIS_UTC = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


def check_event_stream(events: list[dict[str, Any]]) -> str:
    """The docs/design.md "Runner events v1" invariants every run's stream keeps; returns the run id."""
    assert events, "no events"
    run_id = events[0]["run_id"]
    for event in events:
        assert set(event) == EVENT_KEYS, event
        assert event["run_id"] == run_id
        assert event["type"] in EVENT_TYPES, event["type"]
        assert isinstance(event["log_seq"], int) and event["log_seq"] >= 1
        assert isinstance(event["data"], dict) and isinstance(event["raw"], dict)
        assert event["raw"].get("jsonrpc") == "2.0", event["raw"]
        assert RFC3339_MILLIS_UTC.fullmatch(event["ts"]), event["ts"]
        assert datetime.fromisoformat(event["ts"]).tzinfo == UTC
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    log_seqs = [event["log_seq"] for event in events]
    assert log_seqs == sorted(log_seqs)
    assert events[0]["type"] == "task.started"
    ends = [event for event in events if event["type"] in ("task.finished", "task.failed")]
    assert ends == [events[-1]], "exactly one end event, and it is the last"
    return str(run_id)


def no_events_on(stderr: str) -> None:
    """stderr may carry diagnostics, never runner events."""
    assert '"run_id"' not in stderr, stderr
    assert '"type": "task.' not in stderr, stderr


# --- the runs: started together, since each is mostly start-up CPU ------------------


@dataclass(frozen=True)
class ScenarioRun:
    repo: Path
    run: Invocation

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.run.json_lines()


@dataclass(frozen=True)
class Runs:
    written: ScenarioRun
    logged_events: Invocation
    logged_entries: Invocation
    denied: ScenarioRun
    node_pipe: ScenarioRun
    pytest_pipe: ScenarioRun | None
    overloaded: ScenarioRun
    over_budget: ScenarioRun


def agent_python_has_pytest(env: dict[str, str], home: Path) -> bool:
    """The agent's tools get baton's PATH and a fresh HOME: can they run ``python3 -m pytest``?"""
    python = shutil.which("python3", path=env.get("PATH", ""))
    if python is None:
        return False
    probe = subprocess.run(
        [python, "-m", "pytest", "--version"],
        env={"PATH": env.get("PATH", ""), "HOME": str(home)},
        capture_output=True,
        timeout=30,
    )
    return probe.returncode == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Every run of this module, each with its own BATON_HOME and repository, all at once.

    Every process has ended when this returns, so the per-test leftover-process check holds.
    """
    base = tmp_path_factory.mktemp("runs")
    readme = {"README.md": "# a repository\n"}
    repos = {
        "written": make_git_repo(base / "written", readme),
        "denied": make_git_repo(base / "denied", readme),
        "node_pipe": sample_repo(base / "calc"),
        "pytest_pipe": make_git_repo(base / "py", {"test_sums.py": "def test_sum():\n    assert 1 + 1 == 3\n"}),
        "overloaded": make_git_repo(base / "overloaded", readme),
        "over_budget": make_git_repo(base / "over_budget", readme),
    }
    write_and_run = ("--scenario", "write-and-run", "--mode", "acceptEdits", "--allow", "Bash(echo:*)")
    # A command behind a pipe is two commands: each needs an allow rule (docs/policy.md).
    tests_piped = ("Run the tests", "--allow", "Bash(tail:*)")
    arguments: dict[str, tuple[str, ...]] = {
        "written": ("Create hello.txt and run echo hi", *write_and_run),
        "denied": ("Create approved.txt", "--scenario", "needs-approval", "--deny", "Bash(touch:*)"),
        "node_pipe": (*tests_piped, "--scenario", "node-test-pipe", "--allow", "Bash(node --test:*)"),
        "pytest_pipe": (*tests_piped, "--scenario", "pytest-pipe", "--allow", "Bash(python3 -m pytest:*)"),
        "overloaded": ("Do step one", "--scenario", "api-error", "--allow", "Bash(echo:*)"),
        "over_budget": ("Create hello.txt and run echo hi", *write_and_run, "--budget-usd", "0.001", "--no-wait"),
    }
    clis = {name: BatonCLI(base / "homes" / name) for name in repos}
    # The agent's `python3` is the first on baton's PATH: this venv's, which has pytest (make setup).
    pytest_env = clis["pytest_pipe"].env
    pytest_env["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), pytest_env.get("PATH", "")))
    if not agent_python_has_pytest(pytest_env, base):
        del repos["pytest_pipe"]
    started = {
        name: clis[name].start("run", arguments[name][0], "--repo", str(repo), *arguments[name][1:], "--json")
        for name, repo in repos.items()
    }
    logs: list[Started] = []
    try:
        written = ScenarioRun(repos["written"], BatonCLI.finish(started.pop("written")))
        assert written.run.returncode == 0, written.run.describe()
        run_id = written.events[0]["run_id"]
        logs = [clis["written"].start("logs", run_id, "--view", view) for view in ("events", "acp")]
        done = {name: ScenarioRun(repos[name], BatonCLI.finish(started[name])) for name in started}
        logged_events, logged_entries = (BatonCLI.finish(process) for process in logs)
    finally:
        BatonCLI.stop([*started.values(), *logs])
    return Runs(
        written=written,
        logged_events=logged_events,
        logged_entries=logged_entries,
        denied=done["denied"],
        node_pipe=done["node_pipe"],
        pytest_pipe=done.get("pytest_pipe"),
        overloaded=done["overloaded"],
        over_budget=done["over_budget"],
    )


def test_json_prints_one_runner_event_per_line_in_the_design_shape(runs: Runs) -> None:
    written = runs.written
    events = written.events
    run_id = check_event_stream(events)
    assert re.fullmatch(r"run_[0-9a-z]+", run_id)
    no_events_on(written.run.stderr)

    started = events[0]["data"]
    assert started["agent"] == "claude"
    assert started["model"] is None
    assert started["cwd"] == str(written.repo.resolve())
    assert isinstance(started["agent_session_id"], str) and started["agent_session_id"]
    assert started["permission_mode"] == "acceptEdits"
    assert started["run_mode"] == "background"

    (changed,) = of_type(events, "file.changed")
    assert changed["data"]["path"] == "hello.txt"
    assert changed["data"]["abs_path"] == str(written.repo.resolve() / "hello.txt")
    assert Path(changed["data"]["abs_path"]).is_absolute()
    assert changed["data"]["change"] == "add"
    assert changed["data"]["tool"] == "Write"
    assert (written.repo / "hello.txt").read_text() == "hello from baton\n"

    (command_started,) = of_type(events, "command.started")
    (command_finished,) = of_type(events, "command.finished")
    assert command_started["data"]["command"] == "echo hi"
    assert command_started["data"]["tool"] == "Bash"
    assert command_finished["data"]["tool_call_id"] == command_started["data"]["tool_call_id"]
    assert command_finished["data"]["command"] == "echo hi"
    assert command_finished["data"]["exit_code"] == 0
    assert command_finished["data"]["output"] == "hi"
    assert command_finished["data"]["is_error"] is False
    assert command_finished["data"]["denied"] is False
    assert events.index(changed) < events.index(command_started) < events.index(command_finished)

    agent_texts = [event["data"]["text"] for event in of_type(events, "message") if event["data"]["role"] == "agent"]
    assert agent_texts[-1] == "Created hello.txt and ran `echo hi`, which printed: hi"

    types = [event["type"] for event in events]
    assert types.index("turn.finished") < types.index("task.finished") == len(events) - 1
    finished = events[-1]["data"]
    assert finished["stop_reason"] == "end_turn"
    # Three scripted replies at 100 input and 20 output tokens each.
    assert finished["usage"]["input_tokens"] == 300
    assert finished["usage"]["output_tokens"] == 60
    assert finished["total_cost_usd"] > 0
    assert finished["result"] == agent_texts[-1]


def test_logs_view_events_reprints_exactly_what_json_streamed(runs: Runs) -> None:
    logged = runs.logged_events
    assert logged.returncode == 0, logged.describe()
    assert logged.stderr == ""
    assert logged.json_lines() == runs.written.events
    assert logged.stdout == runs.written.run.stdout


def test_logs_view_acp_prints_the_whole_log_with_every_decision(runs: Runs) -> None:
    logged = runs.logged_entries
    assert logged.returncode == 0, logged.describe()
    assert logged.stderr == ""
    entries = logged.json_lines()
    events = runs.written.events
    for entry in entries:
        assert set(entry) == ENTRY_KEYS, entry
        assert entry["run_id"] == events[0]["run_id"]
        assert entry["direction"] in ("to_agent", "from_agent", "baton")
        assert entry["payload"]["jsonrpc"] == "2.0"
        assert RFC3339_MILLIS_UTC.fullmatch(entry["ts"]), entry["ts"]
    assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1))
    assert {entry["direction"] for entry in entries} == {"to_agent", "from_agent", "baton"}
    assert entries[0]["method"] == "_baton/run_started"
    assert entries[-1]["method"] == "_baton/status"
    assert entries[-1]["payload"]["params"]["status"] == "finished"
    sessions = [entry["payload"]["params"] for entry in entries if entry["method"] == "_baton/agent_session"]
    assert [params["agent_session_id"] for params in sessions] == [events[0]["data"]["agent_session_id"]]

    # Every event's raw is the payload of the entry that produced it.
    by_seq = {entry["seq"]: entry for entry in entries}
    for event in events:
        assert event["raw"] == by_seq[event["log_seq"]]["payload"], event

    requests = [
        entry
        for entry in entries
        if entry["method"] == "session/request_permission" and entry["direction"] == "from_agent"
    ]
    verdicts = {}
    for request in requests:
        (response,) = [
            entry
            for entry in entries
            if entry["seq"] > request["seq"]
            and entry["direction"] == "to_agent"
            and entry["method"] == "session/request_permission"
            and entry["payload"].get("id") == request["payload"]["id"]
        ]
        verdict = response["payload"]["result"]["_meta"]["baton"]
        assert verdict["decision"] in ("allow", "deny")
        assert verdict["reason"]
        tool = request["payload"]["params"]["_meta"]["baton"]["tool_name"]
        verdicts[tool] = (verdict["decision"], verdict["reason"])
    assert verdicts == {"Write": ("allow", "mode:acceptEdits"), "Bash": ("allow", "rule:Bash(echo:*)")}


def test_a_permission_request_describes_the_call_like_its_tool_call(runs: Runs) -> None:
    entries = runs.logged_entries.json_lines()
    announced = {
        entry["payload"]["params"]["update"]["toolCallId"]: entry["payload"]["params"]["update"]
        for entry in entries
        if entry["method"] == "session/update" and entry["payload"]["params"]["update"]["sessionUpdate"] == "tool_call"
    }
    requests = [
        entry["payload"]["params"]
        for entry in entries
        if entry["method"] == "session/request_permission" and entry["direction"] == "from_agent"
    ]
    assert len(requests) == 2
    for params in requests:
        tool_call = announced[params["toolCall"]["toolCallId"]]
        assert (params["toolCall"]["kind"], params["toolCall"]["title"]) == (tool_call["kind"], tool_call["title"])
        assert params["_meta"]["baton"]["kind"] == tool_call["kind"]


def test_task_finished_carries_the_agents_num_turns(runs: Runs) -> None:
    entries = runs.logged_entries.json_lines()
    (usage,) = [entry["payload"]["params"] for entry in entries if entry["method"] == "_baton/usage"]
    assert isinstance(usage["num_turns"], int) and usage["num_turns"] >= 1
    assert runs.written.events[-1]["data"]["num_turns"] == usage["num_turns"]


def test_a_denied_tool_is_reported_and_the_agent_carries_on(runs: Runs) -> None:
    run = runs.denied.run
    assert run.returncode == 0, run.describe()
    no_events_on(run.stderr)
    events = run.json_lines()
    check_event_stream(events)
    assert events[0]["data"]["permission_mode"] == "default"

    (denial,) = [event for event in of_type(events, "message") if event["data"].get("denied")]
    assert denial["data"]["denied"] is True
    assert denial["data"]["tool"] == "Bash"
    assert "Bash(touch:*)" in denial["data"]["text"]
    (finished_command,) = of_type(events, "command.finished")
    assert finished_command["data"]["command"] == "touch approved.txt"
    assert finished_command["data"]["denied"] is True
    assert finished_command["data"]["is_error"] is True

    later = [
        event
        for event in of_type(events, "message")
        if event["seq"] > denial["seq"] and event["data"]["role"] == "agent"
    ]
    assert later and later[-1]["data"]["text"].startswith("The command finished. Tool result: ")
    assert events[-1]["type"] == "task.finished"
    assert not (runs.denied.repo / "approved.txt").exists()


def check_failed_test_behind_a_pipe(scenario_run: ScenarioRun, command: str, failure: str) -> None:
    run = scenario_run.run
    assert run.returncode == 0, run.describe()
    events = run.json_lines()
    check_event_stream(events)
    (finished_command,) = of_type(events, "command.finished")
    assert finished_command["data"]["command"] == command
    assert finished_command["data"]["denied"] is False
    assert finished_command["data"]["exit_code"] == 0  # tail's
    assert failure in finished_command["data"]["output"]
    (result,) = of_type(events, "test.result")
    assert result["data"]["passed"] is False
    assert result["data"]["command"] == command
    assert result["data"]["tool_call_id"] == finished_command["data"]["tool_call_id"]
    assert events.index(finished_command) < events.index(result)
    assert events[-1]["type"] == "task.finished"


def test_a_failing_node_test_behind_a_pipe_is_a_failed_test_result(runs: Runs) -> None:
    check_failed_test_behind_a_pipe(runs.node_pipe, "node --test 2>&1 | tail -20", "# fail 1")


def test_a_failing_pytest_behind_a_pipe_is_a_failed_test_result(runs: Runs) -> None:
    assert runs.pytest_pipe is not None, "`python3 -m pytest` does not run on baton's PATH: the agent cannot run it"
    check_failed_test_behind_a_pipe(runs.pytest_pipe, "python3 -m pytest -q 2>&1 | tail -5", "1 failed")


def test_an_overloaded_api_fails_the_run_with_its_events_on_stdout(runs: Runs) -> None:
    run = runs.overloaded.run
    assert run.returncode == 1, run.describe()
    no_events_on(run.stderr)
    events = run.json_lines()
    check_event_stream(events)
    (finished_command,) = of_type(events, "command.finished")
    assert finished_command["data"]["output"] == "step1"
    failed = events[-1]
    assert failed["type"] == "task.failed"
    assert failed["data"]["code"] == "agent_error"
    assert "529" in failed["data"]["message"]
    assert not of_type(events, "task.finished")


def test_a_spent_budget_parks_the_run_on_a_resource_limit_gate(runs: Runs) -> None:
    # Each scripted reply costs $0.0008 (100 input, 20 output tokens); write-and-run needs three.
    # Claude Code checks the budget after each reply, so the second one (total $0.0016) ends the
    # turn before its `echo hi` runs: an overshoot of at most one call (docs/design.md). The run parks on
    # a resource_limit gate (docs/gates.md); with --no-wait, baton run exits 4.
    run = runs.over_budget.run
    assert run.returncode == 4, run.describe()
    no_events_on(run.stderr)
    events = run.json_lines()
    assert events[0]["type"] == "task.started"  # and no end: the run is parked, not ended
    [opened] = of_type(events, "gate.opened")
    assert opened["data"]["kind"] == "resource_limit"
    assert (runs.over_budget.repo / "hello.txt").read_text() == "hello from baton\n"  # the first step ran
    assert not of_type(events, "command.finished"), "echo hi must not run once the budget is spent"
    assert not of_type(events, "task.finished") and not of_type(events, "task.failed")
