"""``baton logs RUN``: a run's log entries (``--view acp``) or runner events (``--view events``);
``--pretty`` prints the events as ``baton run`` showed them live (the same renderer)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from contextlib import aclosing
from typing import Annotated, Any

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError, UsageError
from baton.runs.queries import Runs

__all__ = ["logs_command"]


@app.command("logs")
def logs_command(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    view: Annotated[str, typer.Option("--view", help="acp (log entries) or events (runner events).")] = "events",
    after: Annotated[int, typer.Option("--after", help="Only entries or events with a larger seq.")] = 0,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing what is committed until the run ends.")
    ] = False,
    pretty: Annotated[
        bool, typer.Option("--pretty", help="The events as the live view of `baton run` showed them.")
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Errors as JSON on stderr too.")] = False,
) -> None:
    """Print a run's log entries or runner events, one JSON object per line (or --pretty)."""
    try:
        if view not in ("acp", "events"):
            raise UsageError("invalid_argument", f"--view must be acp or events, not {view!r}")
        if pretty and view != "events":
            raise UsageError("invalid_argument", "--pretty shows runner events: leave out --view acp")
        write = _pretty_writer() if pretty else _json_line
        if follow:
            asyncio.run(_follow(run_id, view, after, write))
            return
        records = asyncio.run(_read(run_id, view, after))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    for record in records:
        write(record)


def _json_line(record: Any) -> None:
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")


def _pretty_writer() -> Callable[[Any], None]:
    from rich.console import Console

    from baton.cli._render import LiveView

    view = LiveView(Console(highlight=False))
    return lambda event: view.show(dict(event))


async def _read(run_id: str, view: str, after: int) -> list[Any]:
    async with Runs(Settings.load()) as runs:
        if view == "acp":
            return list(await runs.read_log(run_id, after=after))
        return list(await runs.runner_events(run_id, after=after))


async def _follow(run_id: str, view: str, after: int, write: Callable[[Any], None]) -> None:
    """Print each record as soon as it is committed, from whichever process executes the run."""
    from baton.events.project import Projector

    async with Runs(Settings.load()) as runs:
        projector = Projector(run_id)
        # Event seqs are a fold over the whole log: project from its start, print what follows.
        start = after if view == "acp" else 0
        async with aclosing(runs.follow_log(run_id, start)) as entries:
            async for entry in entries:
                records: list[Any] = (
                    [entry] if view == "acp" else [e for e in projector.feed(entry) if e["seq"] > after]
                )
                for record in records:
                    write(record)
                if records:
                    sys.stdout.flush()
