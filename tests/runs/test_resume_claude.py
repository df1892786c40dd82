"""Resume with the real Claude Code (scripted): the rebuilt path when the agent home is gone,
and the native path continuing an ended run's conversation in a new run."""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from tests.cli._baton_cli import cli_environment, invoke_in_process
from tests.runs._killed_run import PERMISSION_ANSWERS, RULES, count, run_killed_once

from baton.config import Settings
from baton.events.entry import LogEntry
from baton.events.project import project
from baton.runs import Baton, RunSpec
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.claude

MODEL_KEY = "sk-scripted-resume-key-0123456789abcdef"


def test_rebuilt_context_when_the_agent_home_is_gone(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "baton-home"
    with ScriptedModelServer("three-steps") as server:
        env = cli_environment(home) | {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": MODEL_KEY}
        # The third answer lets `sleep 1; echo hi` start.
        run_id = run_killed_once(repo, env, lambda database: count(database, PERMISSION_ANSWERS) >= 3)
        shutil.rmtree(home / "runs" / run_id / "agent-home")

        # `baton resume` in this process: the run killed above was another process's (the CLI's
        # own start is tested in tests/cli); this saves a ~2.5 s start that imports the agents' SDKs.
        model = {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": MODEL_KEY, "CLAUDE_CODE_MAX_RETRIES": "1"}
        resumed = invoke_in_process(monkeypatch, home, "resume", run_id, "--json", env=model)
        requests = server.requests
    assert resumed.returncode == 0, resumed.stderr
    events = [json.loads(line) for line in resumed.stdout.splitlines()]
    types = [event["type"] for event in events]
    assert "task.started" not in types and types[-1] == "task.finished"  # the run's events go on
    commands = [event["data"]["command"] for event in events if event["type"] == "command.finished"]
    assert commands == ["sleep 1; echo hi"]
    assert (repo / "one.txt").read_text() == "one\n" and (repo / "two.txt").read_text() == "two\n"

    # The first request of the resumed session; the later ones repeat it as their history.
    rebuilt = next(request for request in requests if "<baton-transcript>" in json.dumps(request.body))
    text = json.dumps(rebuilt.body, ensure_ascii=False)
    for expected in (
        "[baton:resume]",
        "rebuilt the conversation from the run's log",
        "[user]\\ngo",
        "[assistant]\\nStep 1: writing one.txt.",
        "[tool call Write",
        "one.txt",
        "[tool call Bash",
        "interrupted: no result was recorded",
        "[baton:interrupted Bash] sleep 1; echo hi (call toolu_",
    ):
        assert expected in text, expected
    assert rebuilt.step == 4  # the scenario's "the command was cut short" branch answered

    entries = log_entries(home / "baton.db", run_id)
    assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1))
    [resume] = [entry["payload"]["params"] for entry in entries if entry["method"] == "_baton/resume"]
    bash_calls = [
        entry["payload"]["params"]["update"]["toolCallId"]
        for entry in entries
        if entry["method"] == "session/update"
        and entry["payload"]["params"]["update"].get("sessionUpdate") == "tool_call"
        and entry["payload"]["params"]["update"]["_meta"]["baton"]["tool_name"] == "Bash"
    ]
    assert resume["path"] == "rebuilt" and resume["interrupted_calls"] == bash_calls[:1]
    assert resume["prompt"].startswith("[baton:resume]") and "<baton-transcript>" not in resume["prompt"]
    all_types = [event["type"] for event in project(entries)]
    assert all_types.count("task.started") == 1 and all_types.count("task.finished") == 1
    assert all_types[-1] == "task.finished"


def log_entries(database: Path, run_id: str) -> list[LogEntry]:
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            "SELECT seq, ts, direction, method, payload FROM log_entries JOIN runs USING (run_key) "
            "WHERE runs.id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
    return [
        {"run_id": run_id, "seq": seq, "ts": ts, "direction": direction, "method": method, "payload": json.loads(text)}
        for seq, ts, direction, method, text in rows
    ]


async def test_an_ended_run_continues_its_conversation_natively_in_a_new_run(settings: Settings, repo: Path) -> None:
    with ScriptedModelServer("three-steps") as server:
        configured = replace(settings, anthropic_base_url=server.base_url, anthropic_api_key=MODEL_KEY)
        async with Baton(configured) as baton:
            first = await baton.run(RunSpec(prompt="go", repo=repo, permission_mode="acceptEdits", allow=RULES))
            assert first.status == "finished"
            # The conversation state was kept while the run executed, up to its last entry.
            kept = await baton.store.load_conversation_state(first.run_id)
            first_log = await baton.log.read(first.run_id)
            assert kept is not None and kept[0] == first_log[-1]["seq"] and kept[1]["status"] == "finished"
            assert kept[1]["items"][0] == {"type": "user", "text": "go"}
            before = len(server.requests)
            handle = await baton.resume(first.run_id, "Run the command once more. [baton:interrupted Bash]")
            outcome = await handle.wait()
            entries = await baton.log.read(handle.run_id)
            record = await baton.store.get_run(handle.run_id)
            old = await baton.store.get_run(first.run_id)
        requests = server.requests[before:]
    assert outcome.status == "finished" and handle.run_id != first.run_id
    assert record.resumed_from == first.run_id and record.status == "finished" and old.status == "finished"
    assert handle.resume_plan is not None and handle.resume_plan.params["path"] == "native"
    # Native: Claude Code restored the first run's session, so the model sees its whole history.
    [turn] = [request for request in requests if request.step == 4]
    history = json.dumps(turn.body["messages"])
    assert "Step 1: writing one.txt." in history and "All three steps are done." in history
    assert "Run the command once more." in history
    assert entries[0]["method"] == "_baton/run_started"
    assert entries[0]["payload"]["params"]["resumed_from"] == first.run_id
    types = [event["type"] for event in project(entries)]
    assert types[0] == "task.started" and types[-1] == "task.finished"
    assert [event["data"]["command"] for event in project(entries) if event["type"] == "command.finished"] == [
        "sleep 1; echo hi"
    ]
