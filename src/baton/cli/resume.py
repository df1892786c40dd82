"""``baton resume RUN [PROMPT]``: continue a run whose process stopped; behaves and exits like ``baton run``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

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

__all__ = ["resume_command"]


@app.command("resume")
def resume_command(
    run_id: Annotated[str, typer.Argument(help="The run to resume.")],
    prompt: Annotated[
        str | None,
        typer.Argument(help="What to tell the agent (required for an ended run); default: a continuation prompt."),
    ] = None,
    repo: Annotated[
        Path | None, typer.Option("--repo", help="The working tree, when it moved since the run started.")
    ] = None,
    scenario: Annotated[
        str | None,
        typer.Option(
            "--scenario", help="Continue on baton's scripted model with this scenario (default: the run's own)."
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="One runner event per line on stdout.")] = False,
    no_wait: Annotated[
        bool,
        typer.Option("--no-wait", help="Exit 4 as soon as a gate opens (the run parks): no wait for a decision."),
    ] = False,
) -> None:
    """Resume a run: its agent continues where it stopped (exit codes as for `baton run`)."""
    try:
        settings = Settings.load(None, **_parks_at_once(no_wait))
        code = asyncio.run(_resume(run_id, prompt, repo, scenario_argument(scenario), settings, json_output, no_wait))
    except BatonError as exc:
        code = report_error(exc, json_output)
    raise typer.Exit(code)


async def _resume(
    run_id: str,
    prompt: str | None,
    repo: Path | None,
    scenario: str | None,
    settings: Settings,
    json_output: bool,
    no_wait: bool,
) -> int:
    from baton.runs import Baton  # imported here: the agents' SDKs are slow to import

    console = Console(stderr=json_output, highlight=False)
    async with Baton(settings) as baton:
        handle = await baton.resume(run_id, prompt, repo=repo, scenario=scenario)
        plan = handle.resume_plan
        if plan is None:  # still queued: its process died before it started; it starts from its beginning
            console.print(f"[bold]▶ started[/] queued run {escape(handle.run_id)} (its process died before it started)")
            return await follow_run(baton, handle, console=console, json_output=json_output, no_wait=no_wait)
        # Events of this execution only: an in-place resume continues the run's event stream.
        after_log_seq = 0 if plan.resumed_from else plan.conversation.upto_seq
        if plan.resumed_from:
            console.print(f"[dim]continuing ended run {escape(run_id)} in run {escape(handle.run_id)}[/]")
        calls = plan.params["interrupted_calls"]
        console.print(
            f"[bold]↻ resumed[/] run {escape(handle.run_id)} ({plan.params['path']} path"
            + (f"; interrupted: {escape(', '.join(calls))}" if calls else "")
            + ")",
            soft_wrap=True,
        )
        return await follow_run(
            baton, handle, console=console, json_output=json_output, no_wait=no_wait, after_log_seq=after_log_seq
        )
