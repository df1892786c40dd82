"""``kill -9`` of ``baton serve`` while a run it executes has a command running: the kernel ends
the run's agent and its tools with the server (docs/sandbox.md), as for ``baton run``
(tests/runs/test_contained_kill.py): within 1 s no process carries the run's ``BATON_RUN_ID``,
nothing more is written to the workspace, and the model is asked nothing more."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from tests.cli._baton_cli import baton_command, cli_environment
from tests.conftest import make_git_repo
from tests.runs.test_contained_kill import command_sleeping

from baton.agents.processes import kill_run_processes, run_process_ids
from baton.sandbox.bwrap import containment
from baton.testing import ScriptedModelServer

pytestmark = [
    pytest.mark.claude,
    pytest.mark.timeout(180),
    pytest.mark.skipif(not containment().available, reason="bubblewrap cannot contain here"),
]
MODEL_KEY = "sk-ant-kill-serve-0123456789"


@pytest.mark.parametrize("group", [False, True], ids=["server-alone", "process-group"])
def test_a_killed_server_takes_its_runs_agents_with_it(tmp_path: Path, group: bool) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# kill the server\n"})
    with ScriptedModelServer("bash-prompt") as model:
        env = cli_environment(tmp_path / "home")
        env.update(ANTHROPIC_BASE_URL=model.base_url, ANTHROPIC_API_KEY=MODEL_KEY)
        server = subprocess.Popen(
            [*baton_command(), "serve", "--port", "0"], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        run_id = None
        try:
            assert server.stderr is not None
            url = None
            for line in server.stderr:
                if match := re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", line):
                    url = match.group(1)
                    break
            assert url, "baton serve did not start"
            token = (tmp_path / "home" / "api-token").read_text().strip()
            body = {
                "prompt": "sleep 6 && echo done > done.txt",
                "repo": str(repo),
                "workspace": "in-place",
                "permission_mode": "acceptEdits",
                "allow": ["Bash"],
            }
            created = httpx.post(f"{url}/v1/runs", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)
            assert created.status_code == 201, created.text
            run_id = created.json()["id"]
            deadline = time.monotonic() + 90
            while not command_sleeping(run_id) and time.monotonic() < deadline and server.poll() is None:
                time.sleep(0.02)
            assert command_sleeping(run_id), "the run's command never started"
            asked = len(model.requests)
            if group:
                os.killpg(server.pid, signal.SIGKILL)
            else:
                os.kill(server.pid, signal.SIGKILL)
            killed = time.monotonic()
            server.wait(timeout=30)
            while run_process_ids(run_id) and time.monotonic() < killed + 1.0:
                time.sleep(0.01)
            assert not run_process_ids(run_id), "1 s after the kill the run's processes still run"
            time.sleep(7)  # longer than the command's sleep: an orphan would write done.txt now
            assert not (repo / "done.txt").exists()
            assert len(model.requests) == asked, "the model was asked after the kill"
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
            if server.stderr is not None:
                server.stderr.close()
            if run_id is not None:
                kill_run_processes(run_id)
