"""Ctrl-C in the terminal that runs ``baton run`` cancels the run (exit 5), whatever the agent does.

The terminal's ^C is SIGINT to its foreground process group: baton's alone, because every agent
runs in a session of its own (Claude's launcher behind ``setsid``), so the agent never sees the
signal and baton cancels the turn as it would for ``kill -INT``.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest
from tests.cli._baton_cli import BatonCLI, baton_command
from tests.conftest import make_git_repo
from tests.runs._killed_run import count, only_run_id

from baton.agents.processes import kill_run_processes, run_process_ids

pytestmark = pytest.mark.timeout(150)


def _command_running(run_id: str, name: bytes) -> bool:
    for pid in run_process_ids(run_id):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(name):
                return True
        except OSError:
            continue
    return False


def test_ctrl_c_in_the_terminal_during_a_command_cancels_the_run(baton: BatonCLI, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "hi\n"})
    controller, terminal = pty.openpty()
    # `setsid --ctty`: baton leads a new session whose controlling terminal is the pty, and is
    # its foreground process group, as in a terminal emulator.
    args = ["run", "wait", "--repo", str(repo), "--scenario", "long-command", "--mode", "acceptEdits"]
    args += ["--allow", "Bash"]
    process = subprocess.Popen(
        ["setsid", "--ctty", *baton_command(), *args],
        env={**baton.env, "COLUMNS": "200"},
        stdin=terminal,
        stdout=terminal,
        stderr=subprocess.PIPE,
    )
    os.close(terminal)
    database = baton.home / "baton.db"
    shown = b""
    try:
        deadline = time.monotonic() + 90
        run_id = None
        while time.monotonic() < deadline and process.poll() is None:
            if select.select([controller], [], [], 0.1)[0]:
                shown += os.read(controller, 65536)
            if run_id is None and count(database, "SELECT COUNT(*) FROM runs"):
                run_id = only_run_id(database)
            if run_id is not None and _command_running(run_id, b"sleep"):
                break
        assert run_id is not None and process.poll() is None, shown.decode(errors="replace")
        os.write(controller, b"\x03")  # the terminal's ^C
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            if select.select([controller], [], [], 0.1)[0]:
                try:
                    shown += os.read(controller, 65536)
                except OSError:  # the terminal is gone: baton is ending
                    break
        process.wait(timeout=30)
        stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
        text = shown.decode(errors="replace")
        assert process.returncode == 5, f"exit {process.returncode}\n{text}\nstderr:\n{stderr}"
        assert "Traceback" not in stderr and "ProcessError" not in stderr, stderr
        assert "agent_exited" not in text and "cancelled" in text, text
        assert not run_process_ids(run_id)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
        if process.stderr is not None:
            process.stderr.close()
        if "run_id" in locals() and run_id is not None:
            kill_run_processes(run_id)
