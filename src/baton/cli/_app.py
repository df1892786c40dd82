"""The Typer application every command module registers on, and its ``--version``."""

from __future__ import annotations

from typing import Annotated

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


def _print_version(value: bool) -> None:
    if value:
        from baton import __version__

        typer.echo(f"baton {__version__}")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print baton's version and exit.", callback=_print_version, is_eager=True),
    ] = False,
    log_format: Annotated[
        str | None,
        typer.Option(
            "--log-format",
            help="baton's own log lines on stderr: text or json (JSON lines, with the run id of a run's).",
        ),
    ] = None,
) -> None:
    """Run AI coding agents on tasks in git repositories; every run observable and durable."""
    if log_format is not None:
        if log_format not in ("text", "json"):
            raise typer.BadParameter("--log-format is text or json")
        from baton.observability.baton_logs import configure_logging

        configure_logging("json" if log_format == "json" else "text")
