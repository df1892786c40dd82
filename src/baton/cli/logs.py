"""``baton logs RUN``: a run's log entries (``--view acp``) or runner events (``--view events``);
``--pretty`` prints the events as ``baton run`` showed them live (the same renderer)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError, UsageError

if TYPE_CHECKING:
    from baton.store import Store

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
    # The store and the log only, not ``baton.runs``: its agents' SDKs take ~2 s of CPU to import.
    from baton.events.project import project
    from baton.store import Redactor, SessionLog

    store = await _open_store()
    async with store:
        await store.get_run(run_id)
        log = SessionLog(store, Redactor())  # never entered: it only reads what is committed
        if view == "acp":
            return list(await log.read(run_id, after=after))
        entries = await log.read(run_id)
        return [event for event in project(entries) if event["seq"] > after]


async def _follow(run_id: str, view: str, after: int, write: Callable[[Any], None]) -> None:
    """Print each record as soon as it is committed, from whichever process executes the run."""
    from baton.events.project import Projector
    from baton.runs.tail import follow_entries
    from baton.store import Redactor, SessionLog

    store = await _open_store()
    async with store:
        await store.get_run(run_id)
        log = SessionLog(store, Redactor())  # never entered: it only reads what is committed
        projector = Projector(run_id)
        # Event seqs are a fold over the whole log: project from its start, print what follows.
        start = after if view == "acp" else 0
        async for entry in follow_entries(store, log, run_id, start):
            records: list[Any] = [entry] if view == "acp" else [e for e in projector.feed(entry) if e["seq"] > after]
            for record in records:
                write(record)
            if records:
                sys.stdout.flush()


async def _open_store() -> Store:
    """The configured store (the store and the log only, not ``baton.runs``: its SDKs are slow to import)."""
    from baton.store import Store

    settings = Settings.load()
    settings.home.mkdir(parents=True, exist_ok=True)
    return await asyncio.to_thread(Store.open, settings.resolved_database_url)
