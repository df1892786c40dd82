"""``baton fork RUN [PROMPT] --turn N | --seq N``: a new run from a point of another (docs/resume.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.cli._follow import follow_run
from baton.cli._spec import scenario_argument
from baton.cli.run import _parks_at_once
from baton.config import Settings
from baton.errors import BatonError

__all__ = ["fork_command"]


@app.command("fork")
def fork_command(
    run_id: Annotated[str, typer.Argument(help="The run to fork.")],
    prompt: Annotated[str | None, typer.Argument(help="What to tell the agent after the kept conversation.")] = None,
    turn: Annotated[int | None, typer.Option("--turn", "--at", help="Keep the conversation through this turn.")] = None,
    seq: Annotated[int | None, typer.Option("--seq", "--at-seq", help="Keep the log through this entry.")] = None,
    repo: Annotated[
        Path | None, typer.Option("--repo", help="The fork's working tree (default: the original's repository).")
    ] = None,
    scenario: Annotated[str | None, typer.Option("--scenario", help="Run the fork on this scripted scenario.")] = None,
    record: Annotated[Path | None, typer.Option("--record", help="Record the fork's model traffic.")] = None,
    replay: Annotated[Path | None, typer.Option("--replay", help="Answer the fork from this cassette.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="One runner event per line on stdout.")] = False,
    no_wait: Annotated[
        bool,
        typer.Option("--no-wait", help="Exit 4 as soon as a gate opens (the run parks): no wait for a decision."),
    ] = False,
) -> None:
    """Fork a run: a new run with its conversation up to a turn, on the snapshot taken there."""
    changes: dict[str, Any] = {}
    if scenario is not None:
        changes["scenario"] = scenario_argument(scenario)
    if record is not None:
        changes["record"] = record.absolute()
    if replay is not None:
        changes["replay"] = replay.absolute()
    try:
        settings = Settings.load(None, **_parks_at_once(no_wait))
        code = asyncio.run(_fork(run_id, prompt, turn, seq, repo, changes, settings, json_output, no_wait))
    except BatonError as exc:
        code = report_error(exc, json_output)
    raise typer.Exit(code)


async def _fork(
    run_id: str,
    prompt: str | None,
    turn: int | None,
    seq: int | None,
    repo: Path | None,
    changes: dict[str, Any],
    settings: Settings,
    json_output: bool,
    no_wait: bool,
) -> int:
    from baton.runs import Baton  # imported here: the agents' SDKs are slow to import

    console = Console(stderr=json_output, highlight=False)
    async with Baton(settings) as baton:
        handle = await baton.fork(run_id, prompt, turn=turn, seq=seq, repo=repo.absolute() if repo else None, **changes)
        point = f"turn {turn}" if turn is not None else (f"entry {seq}" if seq is not None else "its end")
        console.print(f"[dim]forked run {escape(run_id)} at {point} into run {escape(handle.run_id)}[/]")
        return await follow_run(baton, handle, console=console, json_output=json_output, no_wait=no_wait)
