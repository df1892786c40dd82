"""The live view of ``baton run`` (no ``--json``) and ``make demo``, as a user sees them.

stdout is a pipe here, so rich draws for a non-terminal: no colours, 80 columns.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.cli._baton_cli import REPO_ROOT, BatonCLI, Invocation, cli_environment, sample_repo

pytestmark = pytest.mark.claude

# baton.demo's prompt and rule; `make demo` runs exactly this on its own copy of the sample.
DEMO_PROMPT = "The tests in this repository fail. Find the bug, fix it, and run the tests to show they pass."


@dataclass(frozen=True)
class Demos:
    repo: Path
    run: Invocation
    make: subprocess.CompletedProcess[str] | None

    @property
    def lines(self) -> list[str]:
        return self.run.stdout.splitlines()


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> Demos:
    """``baton run --scenario demo`` on a sample repository, and ``make demo``, side by side."""
    base = tmp_path_factory.mktemp("demo")
    repo = sample_repo(base / "calc")
    make = shutil.which("make")
    make_demo = None
    if make is not None:
        env = cli_environment(base / "make-home" / "baton")
        env["HOME"] = str(base / "make-home")  # nothing may land in the user's home
        # `-o STAMP`: never let a test reinstall the virtualenv (`setup`, a prerequisite, runs pip).
        make_demo = subprocess.Popen(
            [make, "--no-print-directory", "-o", ".venv/.setup-stamp", "demo"],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    try:
        run = BatonCLI(base / "baton-home")(
            "run",
            DEMO_PROMPT,
            "--repo",
            str(repo),
            "--scenario",
            "demo",
            "--mode",
            "acceptEdits",
            "--allow",
            "Bash(node --test:*)",
        )
        made = None
        if make_demo is not None:
            stdout, stderr = make_demo.communicate(timeout=90)
            made = subprocess.CompletedProcess(make_demo.args, make_demo.returncode, stdout, stderr)
    finally:
        if make_demo is not None and make_demo.poll() is None:
            os.killpg(make_demo.pid, signal.SIGTERM)  # make, the demo's baton, and its Claude Code
            make_demo.communicate(timeout=15)
    return Demos(repo, run, made)


def test_the_live_view_shows_the_agent_fixing_the_test(demos: Demos) -> None:
    run = demos.run
    assert run.returncode == 0, run.describe()
    assert run.stderr == ""
    out = run.stdout
    assert "\x1b[" not in out, "no colour codes when stdout is not a terminal"
    assert re.fullmatch(r"─+ baton run run_[0-9a-z]+ ─+", demos.lines[0]), demos.lines[0]
    assert "mode acceptEdits" in demos.lines[1]
    assert "▶ The tests in this repository fail." in out
    assert "● I'll start by reading the calculator." in out
    assert "⤷ Read calc.js" in out
    assert out.count("$ node --test\n") == 2
    failed = out.index("✘ tests failed")
    fixed = out.index("+  return a + b;")
    passed = out.index("✔ tests passed")
    assert failed < out.index("✎ modify calc.js (Edit)") < out.index("-  return a - b;") < fixed < passed
    assert "Both tests pass now" in out
    closing = demos.lines[-1]
    assert "finished (end_turn)" in closing
    assert re.search(r"cost \$0\.\d{4}", closing), closing
    assert " run run_" in closing
    calc = (demos.repo / "calc.js").read_text()
    assert "return a + b;" in calc
    assert "return a - b;" not in calc


def test_the_closing_line_names_the_whole_run_id(demos: Demos) -> None:
    run_id = demos.lines[0].split(" baton run ")[1].split()[0]
    assert run_id in demos.lines[-1]


def test_make_demo_runs_offline(demos: Demos) -> None:
    if demos.make is None:
        pytest.skip("make is not installed")
    done = demos.make
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "offline, with the scripted model" in done.stdout
    assert "✘ tests failed" in done.stdout
    assert "✔ tests passed" in done.stdout
    assert "finished (end_turn)" in done.stdout.splitlines()[-1]


def test_an_edited_command_is_shown_as_what_ran() -> None:
    from rich.console import Console

    from baton.cli._render import LiveView
    from baton.events.project import project
    from golden.minimal import command_finished

    console = Console(record=True, width=200, color_system=None)
    view = LiveView(console)
    for event in project(command_finished().entries):
        view.show(dict(event))
    shown = console.export_text()
    assert "$ rm -rf one\n$ echo not-removing (edited by ada; proposed: rm -rf one)\n" in shown, shown
