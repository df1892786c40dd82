"""``baton init-sample DIR``: the sample repository of ``make demo`` (a tiny Node project whose
test fails), committed, to try baton on."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.errors import UsageError

__all__ = ["init_sample_command"]


@app.command("init-sample")
def init_sample_command(
    directory: Annotated[Path, typer.Argument(help="Where to create it (missing or empty).")],
) -> None:
    """Create the sample repository `make demo` uses: a small Node project with a failing test."""
    from baton.demo import PROMPT, TEST_RULE, prepare_sample_repo

    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        error = UsageError("invalid_argument", f"{directory} exists and is not an empty directory")
        raise typer.Exit(report_error(error, False))
    repo = prepare_sample_repo(directory)
    sys.stdout.write(
        f"created {repo}: a Node project whose test fails (node --test)\n"
        f"try: baton run {shlex.quote(PROMPT)} --repo {shlex.quote(str(repo))} --scenario demo "
        f"--mode acceptEdits --allow {shlex.quote(TEST_RULE)}\n"
    )
