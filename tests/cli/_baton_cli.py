"""Helpers for driving the installed ``baton`` command in a subprocess, the way a user or a CI job does.

Every invocation gets its own ``BATON_HOME``, no model credentials from the caller's
environment (``--scenario`` supplies the scripted model), and ``CLAUDE_CODE_MAX_RETRIES=1``
(forwarded to Claude Code by baton's default passthrough) so API-error runs end quickly.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import make_git_repo

from baton.testing import copy_sample_repo

REPO_ROOT = Path(__file__).resolve().parents[2]

# Variables of the caller that would change what baton does or how it prints.
_DROPPED = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR")


def baton_command() -> list[str]:
    """The console script installed beside this interpreter, else the same entry point via -c."""
    script = Path(sys.executable).parent / "baton"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from baton.cli import main; main()"]


def cli_environment(home: Path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in _DROPPED and not name.startswith("BATON_")}
    env["BATON_HOME"] = str(home)
    env["BATON_WORKSPACE"] = "in-place"  # these tests read the repository after a run (tests/conftest.py)
    env["CLAUDE_CODE_MAX_RETRIES"] = "1"
    return env


Started = tuple[tuple[str, ...], "subprocess.Popen[str]"]


@dataclass(frozen=True)
class Invocation:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json_lines(self) -> list[dict[str, Any]]:
        """stdout as JSON lines; fails the test on any line that is not one JSON object."""
        records = []
        for number, line in enumerate(self.stdout.splitlines(), 1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                pytest.fail(f"stdout line {number} is not JSON: {line!r}\nstderr:\n{self.stderr}")
            assert isinstance(record, dict), f"stdout line {number} is not an object: {line!r}"
            records.append(record)
        return records

    def describe(self) -> str:
        return f"baton {' '.join(self.args)} → {self.returncode}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


class BatonCLI:
    """``baton …`` as a subprocess with a private ``BATON_HOME``."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = cli_environment(home)

    def notes(self, method: str) -> list[dict[str, Any]]:
        """The params of every log entry of ``method`` (``_baton/sandbox`` …) in the home's SQLite store."""
        with sqlite3.connect(self.home / "baton.db") as connection:
            rows = connection.execute(
                "SELECT payload FROM log_entries WHERE method = ? ORDER BY seq", (method,)
            ).fetchall()
        return [json.loads(row[0])["params"] for row in rows]

    def start(self, *args: str, cwd: Path = REPO_ROOT) -> Started:
        process = subprocess.Popen(
            [*baton_command(), *args],
            cwd=cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        return args, process

    @staticmethod
    def finish(started: Started, timeout: float = 90) -> Invocation:
        args, process = started
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.terminate()  # baton cancels its run and ends Claude Code
            try:
                stdout, stderr = process.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                stdout, stderr = process.communicate()
            pytest.fail(f"baton {' '.join(args)} did not end in {timeout} s\nstdout:\n{stdout}\nstderr:\n{stderr}")
        return Invocation(args, process.returncode, stdout, stderr)

    @staticmethod
    def stop(started: Iterable[Started]) -> None:
        """End processes a failed test leaves behind: SIGTERM (baton cancels its run), then SIGKILL."""
        running = [process for _, process in started if process.poll() is None]
        for process in running:
            process.terminate()
        for process in running:
            try:
                process.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()

    def __call__(self, *args: str, timeout: float = 90) -> Invocation:
        return self.finish(self.start(*args), timeout)

    def here(self, monkeypatch: pytest.MonkeyPatch, *args: str) -> Invocation:
        """``baton …`` with this home through the same app in this process (:func:`invoke_in_process`):
        for the reads and decisions of a test about something else than the console script, which
        would cost a process start (~1 s of CPU) each. Still another process than the run's."""
        return invoke_in_process(monkeypatch, self.home, *args)

    def many(self, *commands: tuple[str, ...]) -> list[Invocation]:
        """Several invocations at once (each one is mostly interpreter start-up)."""
        started = [self.start(*args) for args in commands]
        return [self.finish(one) for one in started]


def invoke_in_process(
    monkeypatch: pytest.MonkeyPatch, home: Path, *args: str, env: dict[str, str] | None = None
) -> Invocation:
    """``baton …`` through ``typer``'s runner in this process, for commands refused before any run
    and for a test about something else than the console script (``env``: variables set for it).

    The same app and error reporting as the console script, without its ~3 s of imports.
    """
    from typer.testing import CliRunner

    from baton.cli import app

    for name in list(os.environ):
        if name in _DROPPED or name.startswith("BATON_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("BATON_HOME", str(home))
    monkeypatch.setenv("BATON_WORKSPACE", "in-place")
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, list(args), prog_name="baton")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Invocation(args, result.exit_code, result.stdout, result.stderr)


def sample_repo(path: Path) -> Path:
    """The demo's Node project (``add`` subtracts, so one of its two tests fails), committed."""
    return make_git_repo(copy_sample_repo(path), {})


def until_event(started: Started, kind: str) -> dict[str, Any]:
    """Read the run's ``--json`` stdout up to the first event of ``kind``."""
    _, process = started
    assert process.stdout is not None
    for line in process.stdout:
        event = json.loads(line)
        if event["type"] == kind:
            return dict(event)
    pytest.fail(f"the run ended before a {kind} event:\n{process.stderr.read() if process.stderr else ''}")
