"""``make demo``: watch Claude Code fix a failing test in a copy of a small sample repository.

Offline with baton's scripted model unless ``ANTHROPIC_API_KEY`` is set, in which case the
real model does the work. Only the test command is allowed by rule; edits inside the
workspace are allowed by the ``acceptEdits`` mode; anything else is denied.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from importlib.resources import as_file, files
from pathlib import Path

__all__ = ["PROMPT", "TEST_RULE", "main", "prepare_sample_repo"]

PROMPT = "The tests in this repository fail. Find the bug, fix it, and run the tests to show they pass."
TEST_RULE = "Bash(node --test:*)"


def prepare_sample_repo(destination: Path) -> Path:
    """Copy the sample repository to ``destination`` and commit it, so it is a real git repo."""
    with as_file(files("baton.testing") / "sample_repo") as source:
        shutil.copytree(source, destination)
    git = ["git", "-C", str(destination), "-c", "user.name=baton demo", "-c", "user.email=demo@baton.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "sample repository"], check=True)
    return destination


def main() -> int:
    from baton.cli import app

    with tempfile.TemporaryDirectory(prefix="baton-demo-") as tmp:
        repo = prepare_sample_repo(Path(tmp) / "calc")
        home = Path(tmp) / "baton-home"
        os.environ.setdefault("BATON_HOME", str(home))
        args = ["run", PROMPT, "--repo", str(repo), "--mode", "acceptEdits", "--allow", TEST_RULE]
        if not os.environ.get("ANTHROPIC_API_KEY"):
            args += ["--scenario", "demo"]
            print("baton demo: offline, with the scripted model (set ANTHROPIC_API_KEY to use the real one)")
        try:
            app(args, prog_name="baton")
        except SystemExit as exit_:
            return int(exit_.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
