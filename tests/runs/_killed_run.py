"""A `baton run` of the `three-steps` scenario SIGKILLed (its whole session) mid-run."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from tests.cli._baton_cli import baton_command

from baton.agents.processes import kill_run_processes, run_process_ids

RULES = ("Bash(echo:*)", "Bash(sleep:*)")
PERMISSION_ANSWERS = (
    "SELECT COUNT(*) FROM log_entries WHERE method = 'session/request_permission' AND direction = 'to_agent'"
)


def count(database: Path, query: str) -> int:
    """``query``'s count read-only, 0 while the database is not there yet."""
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=1) as connection:
            return int(connection.execute(query).fetchone()[0])
    except sqlite3.Error:
        return 0


def only_run_id(database: Path) -> str:
    with sqlite3.connect(database) as connection:
        return str(connection.execute("SELECT id FROM runs").fetchone()[0])


def run_killed_once(repo: Path, env: Mapping[str, str], ready: Callable[[Path], bool]) -> str:
    """``baton run go --repo REPO --mode acceptEdits --json --allow RULES…`` in its own session,
    killed with every process of its run once ``ready(database)`` (60 s at most); the run's id."""
    database = Path(env["BATON_HOME"]) / "baton.db"
    args = ["run", "go", "--repo", str(repo), "--mode", "acceptEdits", "--json"]
    for rule in RULES:
        args += ["--allow", rule]
    process = subprocess.Popen(
        [*baton_command(), *args],
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not ready(database):
        time.sleep(0.005)
    run_id = only_run_id(database)
    os.killpg(process.pid, signal.SIGKILL)
    kill_run_processes(run_id, wait=5)
    process.communicate(timeout=30)
    assert not run_process_ids(run_id)
    return run_id
