"""Crash and resume, end to end: ``baton run`` (the real Claude Code, scripted) is SIGKILLed at a
random point, then a resume brings the run to ``finished``.

Each trial kills the whole session of the ``baton run`` process and every process that carries
the run's ``BATON_RUN_ID`` (Claude Code runs in a session of its own) once ``k`` log entries are
committed, ``k`` random. Afterwards the resume must finish the run with the scenario's files on
disk, a gapless log, a valid event stream, and no process of the run left.

Trials run side by side (each with its own ``BATON_HOME`` and repository) against one scripted
model server in this process, so the server's recorded requests can be checked too; each run is
resumed as soon as it is killed. The kills need ``baton run`` processes; the resumes run through
the Python API in this process (``Baton.resume``, what ``baton resume`` calls;
test_resume_claude.py drives the command), since every ``baton`` process spends seconds of CPU
importing the agents' SDKs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.cli._baton_cli import baton_command, cli_environment
from tests.conftest import make_git_repo

from baton.agents.processes import kill_run_processes, run_process_ids
from baton.config import Settings
from baton.errors import RefusedError
from baton.events.entry import LogEntry
from baton.events.project import project
from baton.runs import Baton, RunOutcome
from baton.testing import ScriptedModelServer

pytestmark = pytest.mark.claude

MODEL_KEY = "sk-scripted-crash-key-0123456789abcdef"
RUN_ARGS = ("go", "--mode", "acceptEdits", "--allow", "Bash(echo:*)", "--allow", "Bash(sleep:*)", "--json")
FILES = {"one.txt": "one\n", "two.txt": "two\n"}
# A three-steps run logs about 32 entries; a kill after the last few may land after the end.
MAX_KILL_AFTER = 28


@dataclass
class Trial:
    index: int
    kill_after: int
    home: Path
    repo: Path
    env: dict[str, str]
    run_id: str | None = None
    killed_at: int | None = None  # the committed entries seen when the kill was sent
    outcome: RunOutcome | RefusedError | None = None
    resume_params: dict[str, Any] = field(default_factory=dict)

    @property
    def database(self) -> Path:
        return self.home / "baton.db"


def committed(database: Path) -> tuple[str | None, int]:
    """The run's id and its last committed seq, read as another process would."""
    if not database.exists():
        return None, 0
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=1) as connection:
            row = connection.execute(
                "SELECT runs.id, COALESCE(MAX(log_entries.seq), 0) FROM runs "
                "LEFT JOIN log_entries ON log_entries.run_key = runs.run_key GROUP BY runs.id"
            ).fetchone()
    except sqlite3.Error:
        return None, 0
    return (row[0], int(row[1])) if row else (None, 0)


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


def run_status(database: Path, run_id: str) -> str:
    with sqlite3.connect(database) as connection:
        return str(connection.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0])


def kill_whole_run(process: subprocess.Popen[str], run_id: str | None) -> None:
    """SIGKILL the baton process's session, then every process of the run (Claude Code included)."""
    with contextlib.suppress(ProcessLookupError):  # it may have ended on its own
        os.killpg(process.pid, signal.SIGKILL)  # started with start_new_session: pgid == pid
    if run_id is not None:
        kill_run_processes(run_id, wait=5)
    process.communicate(timeout=30)


def start_baton(trial: Trial, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*baton_command(), *args],
        env=trial.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def kill_once_committed(trial: Trial, process: subprocess.Popen[str], entries: int) -> None:
    """Kill the whole run once ``entries`` log entries are committed (or the process ended)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run_id, last = committed(trial.database)
        if last >= entries or process.poll() is not None:
            trial.run_id, trial.killed_at = run_id, last
            break
        time.sleep(0.003)
    kill_whole_run(process, trial.run_id or committed(trial.database)[0])
    trial.run_id = trial.run_id or committed(trial.database)[0]


def run_and_kill(trial: Trial) -> None:
    kill_once_committed(trial, start_baton(trial, "run", *RUN_ARGS, "--repo", str(trial.repo)), trial.kill_after)


def resume_and_kill(trial: Trial, more: int) -> None:
    """``baton resume`` the killed run, and kill that too once ``more`` entries are committed."""
    assert trial.run_id is not None
    kill_once_committed(
        trial, start_baton(trial, "resume", trial.run_id, "--json"), committed(trial.database)[1] + more
    )


def settings_of(trial: Trial, server: ScriptedModelServer) -> Settings:
    return Settings.load(
        {"BATON_WORKSPACE": "in-place", "BATON_HOME": str(trial.home), "PATH": os.environ.get("PATH", "")},
        anthropic_base_url=server.base_url,
        anthropic_api_key=MODEL_KEY,
    )


async def resume(trial: Trial, server: ScriptedModelServer) -> None:
    assert trial.run_id is not None
    async with Baton(settings_of(trial, server)) as baton:
        try:
            handle = await baton.resume(trial.run_id)
        except RefusedError as exc:
            trial.outcome = exc
            return
        assert handle.resume_plan is not None
        trial.resume_params = dict(handle.resume_plan.params)
        trial.outcome = await asyncio.wait_for(handle.wait(), 90)


async def crash_then_resume(trial: Trial, server: ScriptedModelServer, twice: bool) -> None:
    """Kill the trial's run (in a thread: it polls the store), then resume it at once.

    ``twice``: the first resume is a ``baton resume`` process, killed at a random point too.
    """
    await asyncio.to_thread(run_and_kill, trial)
    assert trial.run_id is not None, f"trial {trial.index}: no run was recorded"
    assert not run_process_ids(trial.run_id), f"trial {trial.index}: the kill left processes"
    if twice:
        await asyncio.to_thread(resume_and_kill, trial, random.Random(trial.kill_after).randint(1, 30))
        assert not run_process_ids(trial.run_id), f"trial {trial.index}: the second kill left processes"
    await resume(trial, server)


async def all_trials(trials: list[Trial], server: ScriptedModelServer, twice: bool) -> None:
    async with asyncio.TaskGroup() as group:
        for trial in trials:
            group.create_task(crash_then_resume(trial, server, twice))


def make_trials(tmp_path: Path, server: ScriptedModelServer, count: int, seed: int) -> list[Trial]:
    chooser = random.Random(seed)
    trials = []
    for index in range(count):
        home = tmp_path / f"home-{index}"
        env = cli_environment(home)
        env["ANTHROPIC_BASE_URL"] = server.base_url
        env["ANTHROPIC_API_KEY"] = MODEL_KEY
        repo = make_git_repo(tmp_path / f"repo-{index}", {"README.md": "# crash trial\n"})
        trials.append(Trial(index, chooser.randint(1, MAX_KILL_AFTER), home, repo, env))
    return trials


def crash_and_resume(tmp_path: Path, count: int, seed: int, *, twice: bool = False) -> None:
    with ScriptedModelServer("three-steps") as server:
        trials = make_trials(tmp_path, server, count, seed)
        asyncio.run(all_trials(trials, server, twice))
        prompts = [json.dumps(request.body) for request in server.requests]
    for trial in trials:
        check_trial(trial)
        if trial.resume_params.get("path") == "rebuilt":  # the model was given the task back
            assert any(
                str(trial.repo) in prompt and "<baton-transcript>\\n[user]\\ngo\\n" in prompt for prompt in prompts
            ), f"trial {trial.index}: no rebuilt context carried the task"
    # The model saw baton's continuation prompt (native path) or a rebuilt conversation.
    assert any("[baton:resume]" in prompt for prompt in prompts)


def check_trial(trial: Trial) -> None:
    assert trial.run_id is not None
    where = f"trial {trial.index} (killed after {trial.killed_at} entries, aimed at {trial.kill_after})"
    entries = log_entries(trial.database, trial.run_id)
    statuses = [entry["payload"]["params"]["status"] for entry in entries if entry["method"] == "_baton/status"]
    if isinstance(trial.outcome, RefusedError):
        # Killed after the run had ended: nothing to resume without a prompt.
        assert trial.outcome.code == "run_ended" and statuses[-1] == "finished", f"{where}: {trial.outcome}"
    else:
        assert isinstance(trial.outcome, RunOutcome), where
        assert trial.outcome.status == "finished", f"{where}: {trial.outcome}"
        assert trial.resume_params["path"] in ("native", "rebuilt"), where
        assert trial.resume_params["prompt"].startswith("[baton:resume]"), where
        resumes = [entry["payload"]["params"] for entry in entries if entry["method"] == "_baton/resume"]
        # A native resume whose session Claude Code cannot load continues on the rebuilt path.
        assert resumes[-1] in (trial.resume_params, {**trial.resume_params, "path": "rebuilt"}), where
        trial.resume_params = resumes[-1]
        for call_id in trial.resume_params["interrupted_calls"]:  # the continuation prompt names each
            assert call_id in trial.resume_params["prompt"], where
    for name, text in FILES.items():
        assert (trial.repo / name).read_text() == text, f"{where}: {name}"
    assert [entry["seq"] for entry in entries] == list(range(1, len(entries) + 1)), f"{where}: seq has gaps"
    assert run_status(trial.database, trial.run_id) == "finished", where
    types = [event["type"] for event in project(entries)]
    assert types.count("task.started") == 1 and types[0] == "task.started", f"{where}: {types}"
    assert types.count("task.finished") == 1 and types[-1] == "task.finished", f"{where}: {types}"
    assert not run_process_ids(trial.run_id), f"{where}: processes of the run remain"


def test_runs_killed_at_random_points_finish_after_resume(tmp_path: Path) -> None:
    crash_and_resume(tmp_path, count=3, seed=int(os.environ.get("BATON_CRASH_SEED", "0")) or time.time_ns())


# Each of these fits the daily slow budget alone; BATON_CRASH_BATCHES=N runs N batches of 5 for a
# longer hunt (the first sessions ran ~75 trials this way with no failure).
CRASH_BATCHES = int(os.environ.get("BATON_CRASH_BATCHES", "2"))


@pytest.mark.slow(seconds=40)
@pytest.mark.timeout(900)
def test_many_crash_trials(tmp_path: Path) -> None:
    seed = time.time_ns()
    for batch in range(CRASH_BATCHES):
        crash_and_resume(tmp_path / f"batch-{batch}", count=5, seed=seed + batch)


@pytest.mark.slow(seconds=40)
@pytest.mark.timeout(600)
def test_runs_killed_again_while_resuming_finish(tmp_path: Path) -> None:
    seed = time.time_ns()
    for batch in range(max(1, CRASH_BATCHES // 2)):
        crash_and_resume(tmp_path / f"batch-{batch}", count=5, seed=seed + batch, twice=True)
