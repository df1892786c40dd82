"""The live view of ``baton run`` (no ``--json``) and ``make demo``, as a user sees them, and
the same view read back (``baton logs RUN --pretty``).

stdout is a pipe here, so rich draws for a non-terminal: no colours, 80 columns. The run is
README's first example: ``baton init-sample DIR``, then ``baton run … --scenario demo``.
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
from tests.cli._baton_cli import REPO_ROOT, BatonCLI, Invocation, cli_environment

pytestmark = pytest.mark.claude

# baton.demo's prompt and rule; `make demo` runs exactly this on its own copy of the sample.
DEMO_PROMPT = "The tests in this repository fail. Find the bug, fix it, and run the tests to show they pass."


@dataclass(frozen=True)
class Demos:
    repo: Path
    sample: Invocation
    run: Invocation
    make: subprocess.CompletedProcess[str] | None
    baton: BatonCLI

    @property
    def lines(self) -> list[str]:
        return self.run.stdout.splitlines()


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> Demos:
    """``baton run --scenario demo`` on a sample repository, and ``make demo``, side by side."""
    base = tmp_path_factory.mktemp("demo")
    repo = base / "calc"
    baton = BatonCLI(base / "baton-home")
    sample = baton("init-sample", str(repo))
    make = shutil.which("make")
    make_demo = None
    if make is not None:
        env = cli_environment(base / "make-home" / "baton")
        env["HOME"] = str(base / "make-home")  # nothing may land in the user's home
        # `-o STAMP`: never let a test reinstall the virtualenv or the agents (`setup`, a
        # prerequisite, runs pip and npm; npm would replace a shared agents/node_modules).
        stamps = ["-o", ".venv/.setup-stamp", "-o", "agents/node_modules/.package-lock.json"]
        make_demo = subprocess.Popen(
            [make, "--no-print-directory", *stamps, "demo"],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    try:
        run = baton(
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
    return Demos(repo, sample, run, made, baton)


def test_init_sample_makes_the_repository_of_the_first_example(demos: Demos) -> None:
    sample = demos.sample
    assert sample.returncode == 0, sample.describe()
    assert sample.stdout.startswith(f"created {demos.repo}: a Node project whose test fails"), sample.stdout
    assert f"--repo {demos.repo} --scenario demo --mode acceptEdits" in sample.stdout
    committed = subprocess.run(["git", "-C", str(demos.repo), "show", "HEAD:calc.js"], capture_output=True, text=True)
    assert "return a - b;" in committed.stdout  # as created, before the run fixed it
    again = demos.baton("init-sample", str(demos.repo))
    assert again.returncode == 2
    assert again.stderr == f"baton: invalid_argument: {demos.repo} exists and is not an empty directory\n"


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


def test_logs_pretty_prints_the_run_as_the_live_view_did(demos: Demos) -> None:
    run_id = demos.lines[-1].rsplit(" run ", 1)[1]
    replay = demos.baton("logs", run_id, "--pretty")
    assert (replay.returncode, replay.stderr) == (0, "")
    assert replay.stdout == demos.run.stdout


def test_make_demo_runs_offline_and_says_what_to_try_next(demos: Demos) -> None:
    if demos.make is None:
        pytest.skip("make is not installed")
    done = demos.make
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "offline, with the scripted model" in done.stdout
    assert "✘ tests failed" in done.stdout
    assert "✔ tests passed" in done.stdout
    shown, _, after = done.stdout.partition("\nThe run is kept in ")
    assert "finished (end_turn)" in shown.splitlines()[-1]
    kept, _, tried = after.partition("\nNext, try:\n")
    assert "it worked in its own worktree " in kept and "/workspaces/run_" in kept, kept  # the sample is as made
    commands = [line.strip() for line in tried.splitlines() if not line.strip().startswith("#")]
    assert len(commands) == 4, after
    # Pasted into a shell in the checkout, each works on the run the demo made (and kept).
    pasted = [
        subprocess.run(c, shell=True, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60) for c in commands
    ]
    assert [p.returncode for p in pasted] == [0, 0, 0, 0], pasted
    live = shown[shown.index("─") :]  # the live view, from its first line
    assert pasted[0].stdout.rstrip("\n") == live.rstrip("\n")
    assert "+  return a + b;" in pasted[1].stdout
    assert "s1 " in pasted[2].stdout
    # The last one took the run's branch into the sample repository's branch.
    sample = Path(re.search(r"\((\S+) is as made\)", kept).group(1))  # type: ignore[union-attr]
    sample = sample if sample.is_absolute() else REPO_ROOT / sample
    assert "return a + b;" in (sample / "calc.js").read_text()


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
