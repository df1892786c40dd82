"""``make demo``: watch Claude Code fix a failing test in a copy of a small sample repository.

Offline with baton's scripted model unless ``ANTHROPIC_API_KEY`` is set, in which case the
real model does the work. Only the test command is allowed by rule; edits inside the
workspace are allowed by the ``acceptEdits`` mode; anything else is denied.

The run is kept: its ``BATON_HOME`` is ``.baton-home/`` in the current directory (the checkout,
where git ignores it) unless ``BATON_HOME`` is set, the repository ``demo/calc`` inside it (made
anew each time); the run works in its own worktree under ``workspaces/`` there, and at the end
the demo prints where, and three commands to try with the run it made.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["DEMO_HOME", "PROMPT", "TEST_RULE", "main", "next_commands", "prepare_sample_repo"]

PROMPT = "The tests in this repository fail. Find the bug, fix it, and run the tests to show they pass."
TEST_RULE = "Bash(node --test:*)"
DEMO_HOME = Path(".baton-home")


def prepare_sample_repo(destination: Path) -> Path:
    """Copy the sample repository to ``destination`` (missing or empty) and commit it, so it is a
    real git repository."""
    from baton.testing import copy_sample_repo

    copy_sample_repo(destination)
    git = ["git", "-C", str(destination), "-c", "user.name=baton demo", "-c", "user.email=demo@baton.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "sample repository"], check=True)
    return destination


def next_commands(run_id: str, home: Path, baton: str, repo: Path | None = None) -> list[tuple[str, str]]:
    """Commands to try with the demo's run, ready to paste (they name its home), each with what
    it shows; with ``repo``, the one that takes its branch into the sample repository."""
    prefix = f"BATON_HOME={shlex.quote(str(home))} {baton}"
    commands = [
        ("the run again, as it was shown", f"{prefix} logs {run_id} --pretty"),
        ("what the agent changed", f"{prefix} diff {run_id}"),
        ("the working tree as baton captured it after each step", f"{prefix} snapshots {run_id}"),
    ]
    if repo is not None:
        commands.append(
            (
                f"take the run's branch into the checked-out branch of {repo}",
                f"{prefix} merge {run_id}",
            )
        )
    return commands


def main() -> int:
    from baton.cli import app

    home = Path(os.environ.get("BATON_HOME") or DEMO_HOME)
    os.environ["BATON_HOME"] = str(home)
    repo = home / "demo" / "calc"
    if repo.exists():
        shutil.rmtree(repo)  # the sample anew; earlier runs stay in the home
    prepare_sample_repo(repo)
    # Its own worktree (docs/workspaces.md), whatever BATON_WORKSPACE says: the sample stays as made.
    args = [
        "run",
        PROMPT,
        "--repo",
        str(repo),
        "--workspace",
        "worktree",
        "--mode",
        "acceptEdits",
        "--allow",
        TEST_RULE,
    ]
    if not os.environ.get("ANTHROPIC_API_KEY"):
        args += ["--scenario", "demo"]
        print("baton demo: offline, with the scripted model (set ANTHROPIC_API_KEY to use the real one)")
    code = 0
    try:
        app(args, prog_name="baton")
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    run_id, workspace = asyncio.run(_last_run())
    if run_id is not None:
        print(f"\nThe run is kept in {home}/; it worked in its own worktree {workspace} ({repo} is as made).")
        print("Next, try:")
        for what, command in next_commands(run_id, home, _baton_command(), repo):
            print(f"  # {what}\n  {command}")
    return code


async def _last_run() -> tuple[str | None, str | None]:
    """The id of the run the demo made, and the folder it worked in."""
    from baton.config import Settings
    from baton.store import Store

    store = await asyncio.to_thread(Store.open, Settings.load().resolved_database_url)
    async with store:
        runs = await store.list_runs()
    if not runs:
        return None, None
    return runs[-1].id, runs[-1].to_dict()["workspace"]["path"]


def _baton_command() -> str:
    """``baton`` as this interpreter's console script, relative to here when it is below."""
    script = Path(sys.executable).parent / "baton"
    if not script.is_file():
        return "baton"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


if __name__ == "__main__":
    sys.exit(main())
