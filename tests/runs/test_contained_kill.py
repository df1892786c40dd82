"""``kill -9`` of baton leaves nothing of its run behind: the kernel ends the agent's PID namespace.

Each trial starts ``baton run`` (the real Claude Code, or codex-acp) against a scripted model
server in this process, SIGKILLs baton alone or its whole process group at a random moment —
while the agent's command runs, while a gate waits for a human, while the model is answering —
and then checks, *without sweeping anything itself*:

- within 1 s no process carries the run's ``BATON_RUN_ID``;
- nothing more is written to the workspace (the command would have written ``done.txt``);
- no further request reaches the model;

and that ``baton resume`` then finishes the run from its log: gapless, the interrupted call
named as interrupted (never a human's denial).
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.cli._baton_cli import baton_command, cli_environment
from tests.conftest import make_git_repo
from tests.runs._killed_run import count
from tests.runs.test_resume_crash import log_entries, run_status

from baton.agents.processes import kill_run_processes, run_process_ids
from baton.sandbox.bwrap import containment
from baton.testing import ScriptedModelServer

pytestmark = [
    pytest.mark.claude,
    pytest.mark.skipif(not containment().available, reason="bubblewrap cannot make namespaces here"),
]

MODEL_KEY = "sk-scripted-kill-key-0123456789abcdef"
COMMAND = "sleep 3 && echo done > done.txt"
MOMENTS = ("command", "gate", "stream")
AGENTS = ("claude", "codex")


@dataclass(frozen=True)
class KillTrial:
    agent: str
    moment: str
    group: bool  # kill baton's whole process group, else baton alone
    delay: float  # seconds after the moment is reached


def _prompt(trial: KillTrial) -> str:
    return f"{COMMAND} #slow-model" if trial.moment == "stream" else COMMAND


def _args(trial: KillTrial, repo: Path) -> list[str]:
    args = ["run", _prompt(trial), "--repo", str(repo), "--agent", trial.agent, "--json"]
    if trial.moment != "gate":
        args += ["--mode", "acceptEdits", "--allow", "Bash"]
    return args


def _moment_reached(
    trial: KillTrial, database: Path, server: ScriptedModelServer, first_request: int, run_id: str | None
) -> bool:
    if run_id is None:
        return False
    if trial.moment == "gate":
        return count(database, "SELECT COUNT(*) FROM gates WHERE status = 'pending'") > 0
    if trial.moment == "stream":
        return any(request.step == 3 for request in list(server.requests)[first_request:])
    return command_sleeping(run_id)


def command_sleeping(run_id: str) -> bool:
    """Whether one of the run's processes is the ``sleep`` its command started."""
    for pid in run_process_ids(run_id):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"sleep"):
                return True
        except OSError:
            continue
    return False


def _run_id(database: Path) -> str | None:
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=1) as connection:
            row = connection.execute("SELECT id FROM runs").fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def _workspace_state(repo: Path) -> dict[str, tuple[int, int]]:
    return {
        str(path.relative_to(repo)): (path.stat().st_mtime_ns, path.stat().st_size)
        for path in repo.rglob("*")
        if path.is_file() and ".git" not in path.relative_to(repo).parts
    }


def run_trial(tmp_path: Path, server: ScriptedModelServer, trial: KillTrial) -> None:
    where = f"{trial}"
    home = tmp_path / "home"
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# kill trial\n"})
    env = cli_environment(home)
    env.update(
        ANTHROPIC_BASE_URL=server.base_url,
        ANTHROPIC_API_KEY=MODEL_KEY,
        OPENAI_BASE_URL=server.base_url + "/v1",
        OPENAI_API_KEY=MODEL_KEY,
    )
    database = home / "baton.db"
    first_request = len(server.requests)  # the server is shared by the trials
    process = subprocess.Popen(
        [*baton_command(), *_args(trial, repo)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    run_id = None
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and process.poll() is None:
            run_id = run_id or _run_id(database)
            if _moment_reached(trial, database, server, first_request, run_id):
                break
            time.sleep(0.01)
        assert run_id is not None and process.poll() is None, f"{where}: {process.communicate()}"
        time.sleep(trial.delay)
        if trial.group:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            os.kill(process.pid, signal.SIGKILL)
        killed = time.monotonic()
        process.communicate(timeout=30)
        while run_process_ids(run_id) and time.monotonic() < killed + 1.0:
            time.sleep(0.01)
        left = run_process_ids(run_id)
        assert not left, f"{where}: 1 s after the kill these still run: {[_cmdline(pid) for pid in left]}"
        requests, files = len(server.requests), _workspace_state(repo)
        time.sleep(4)  # longer than the command's sleep: an orphan would write done.txt now
        assert _workspace_state(repo) == files, f"{where}: the workspace changed after the kill"
        assert not (repo / "done.txt").exists() or "done.txt" in files, where
        assert len(server.requests) == requests, f"{where}: the model was asked after the kill"
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        if run_id is not None:
            kill_run_processes(run_id)
    resume_and_check(trial, home, env, run_id, repo)


def resume_and_check(trial: KillTrial, home: Path, env: dict[str, str], run_id: str, repo: Path) -> None:
    where = f"{trial} ({run_id})"
    database = home / "baton.db"
    pending = []
    with sqlite3.connect(database) as connection:
        pending = [row[0] for row in connection.execute("SELECT id FROM gates WHERE status = 'pending'")]
    assert bool(pending) == (trial.moment == "gate"), f"{where}: pending gates {pending}"
    baton = [*baton_command()]
    for gate_id in pending:  # killed while the gate waited: the human decides it afterwards
        decided = subprocess.run([*baton, "approve", gate_id], env=env, capture_output=True, text=True, timeout=120)
        assert decided.returncode == 0, f"{where}: {decided.stderr}"
    resumed = subprocess.run(
        [*baton, "resume", run_id, "--json"], env=env, capture_output=True, text=True, timeout=180, cwd=repo
    )
    assert resumed.returncode == 0, f"{where}: resume → {resumed.returncode}\n{resumed.stdout}\n{resumed.stderr}"
    entries = log_entries(database, run_id)
    assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1)), f"{where}: seq has gaps"
    assert run_status(database, run_id) == "finished", where
    resume = [entry for entry in entries if entry["method"] == "_baton/resume"]
    assert resume, f"{where}: no _baton/resume"
    before = entries[: entries.index(resume[0])]
    # Nobody denied anything: no permission answer refused a call before the resume.
    for entry in before:
        if entry["method"] == "session/request_permission" and entry["direction"] == "to_agent":
            meta = (entry["payload"].get("result") or {}).get("_meta", {}).get("baton", {})
            assert meta.get("decision") != "deny", f"{where}: a denial was logged: {meta}"
    params = resume[0]["payload"]["params"]
    if trial.moment == "command":  # the Bash call was in flight: named as interrupted
        assert params["interrupted_calls"], f"{where}: no interrupted call in {params}"
    if trial.moment == "gate":  # the human's approval, never a denial, is what the agent is told
        assert params.get("decided_gates") == pending and "approved" in params["prompt"], f"{where}: {params}"
    assert not run_process_ids(run_id), f"{where}: processes of the run remain after the resume"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"


@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    "trial",
    [KillTrial("claude", "command", True, 0.2), KillTrial("codex", "gate", False, 0.1)],
    ids=lambda trial: f"{trial.agent}-{trial.moment}",
)
def test_killed_baton_leaves_nothing_and_resumes(tmp_path: Path, trial: KillTrial) -> None:
    with ScriptedModelServer("bash-prompt") as server:
        run_trial(tmp_path, server, trial)


@pytest.mark.slow(seconds=600)
@pytest.mark.timeout(3600)
def test_twenty_kill_trials(tmp_path: Path) -> None:
    seed = int(os.environ.get("BATON_KILL_SEED", "0")) or time.time_ns()
    chooser = random.Random(seed)
    with ScriptedModelServer("bash-prompt") as server:
        for index in range(20):
            trial = KillTrial(
                AGENTS[index % 2], MOMENTS[(index // 2) % 3], chooser.random() < 0.5, chooser.uniform(0, 0.8)
            )
            run_trial(tmp_path / f"trial-{index}", server, trial)
