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
)
