"""The Typer application every command module registers on."""

from __future__ import annotations

import typer

__all__ = ["app"]

app = typer.Typer(
    name="baton",
    help="Run AI coding agents on tasks in git repositories; every run observable and durable.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help and usage errors: Rich's formatting costs ~0.1 s of imports at every `--help`
    # and every mistyped option, a third of the start-up budget.
    rich_markup_mode=None,
)
