"""Resume a Codex run (the real codex-acp, scripted): killed mid-command, resumed on the native path
(codex-acp 0.16 offers ``session/resume``: its own session comes back from the run's ``CODEX_HOME``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from tests.cli._baton_cli import baton_command, cli_environment
from tests.runs._killed_run import only_run_id
from tests.runs.test_resume_claude import log_entries

from baton.agents.processes import kill_run_processes, run_process_ids
from baton.config import Settings
from baton.events.project import project
from baton.runs import Baton
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.timeout(120)

OPENAI_KEY = "sk-scripted-openai-key-0123456789abcdef"


def command_announced(database: Path) -> bool:
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=1) as connection:
            row = connection.execute(
                "SELECT COUNT(*) FROM log_entries WHERE method = 'session/update' AND payload LIKE ?",
                ("%sleep 1; echo hi%",),
            ).fetchone()
    except sqlite3.Error:
        return False
    return int(row[0]) > 0


def run_codex_and_kill_mid_command(home: Path, repo: Path, base_url: str) -> str:
    env = cli_environment(home) | {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": OPENAI_KEY}
    args = ["run", "go", "--agent", "codex", "--repo", str(repo), "--mode", "acceptEdits", "--json"]
    args += ["--allow", "Bash(echo:*)", "--allow", "Bash(sleep:*)"]
    process = subprocess.Popen(
        [*baton_command(), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not command_announced(home / "baton.db") and time.monotonic() < deadline:
        time.sleep(0.005)  # Codex runs `sleep 1; echo hi` without asking: kill once it is announced
    run_id = only_run_id(home / "baton.db")
    os.killpg(process.pid, signal.SIGKILL)
    kill_run_processes(run_id, wait=5)
    process.communicate(timeout=30)
    return run_id


async def test_a_codex_run_killed_mid_command_resumes_its_own_session(tmp_path: Path, repo: Path) -> None:
    home = tmp_path / "baton-home"
    with ScriptedModelServer("three-steps") as server:
        base_url = server.base_url + "/v1"
        run_id = await asyncio.to_thread(run_codex_and_kill_mid_command, home, repo, base_url)
        assert not run_process_ids(run_id)

        settings = Settings.load(
            {"BATON_WORKSPACE": "in-place", "BATON_HOME": str(home), "PATH": os.environ["PATH"]},
            openai_base_url=base_url,
            openai_api_key=OPENAI_KEY,
        )
        async with Baton(settings) as baton:
            handle = await baton.resume(run_id)
            outcome = await handle.wait()
        requests = server.requests
    assert outcome.status == "finished", outcome
    assert handle.resume_plan is not None
    params = handle.resume_plan.params
    assert params["path"] == "native" and len(params["interrupted_calls"]) == 1
    assert "[baton:interrupted Bash] sleep 1; echo hi (call " in params["prompt"]
    assert (repo / "one.txt").read_text() == "one\n" and (repo / "two.txt").read_text() == "two\n"
    assert not any("<baton-transcript>" in json.dumps(request.body) for request in requests)
    entries = log_entries(home / "baton.db", run_id)
    resumed = [e for e in entries if e["method"] == "session/resume" and e["direction"] == "to_agent"]
    session_ids = [e["payload"]["params"]["agent_session_id"] for e in entries if e["method"] == "_baton/agent_session"]
    assert len(resumed) == 1 and resumed[0]["payload"]["params"]["sessionId"] == session_ids[0]
    assert len(session_ids) == 2 and session_ids[0] == session_ids[1]
    assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1))
    types = [event["type"] for event in project(entries)]
    assert types.count("task.started") == 1 and types[-1] == "task.finished" and types.count("task.finished") == 1
    assert not run_process_ids(run_id)
