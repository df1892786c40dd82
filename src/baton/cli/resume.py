"""``baton resume RUN [PROMPT]``: continue a run whose process stopped; behaves and exits like ``baton run``."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.cli._render import LiveView
from baton.cli.run import _model_endpoint
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
        str | None, typer.Option("--scenario", help="Use baton's scripted model server with this scenario.")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="One runner event per line on stdout.")] = False,
) -> None:
    """Resume a run: its agent continues where it stopped (exit codes as for `baton run`)."""
    try:
        with _model_endpoint(scenario) as overrides:
            code = asyncio.run(_resume(run_id, prompt, repo, Settings.load(None, **overrides), json_output))
    except BatonError as exc:
        code = report_error(exc, json_output)
    raise typer.Exit(code)


async def _resume(run_id: str, prompt: str | None, repo: Path | None, settings: Settings, json_output: bool) -> int:
    from baton.runs import Baton  # imported here: the agents' SDKs are slow to import

    console = Console(stderr=json_output, highlight=False)
    view = LiveView(console)
    async with Baton(settings) as baton:
        handle = await baton.resume(run_id, prompt, repo=repo)
        plan = handle.resume_plan
        assert plan is not None
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
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, handle.cancel)
        try:
            async for event in baton.events(handle.run_id):
                if event["log_seq"] <= after_log_seq:
                    continue
                if json_output:
                    sys.stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
                    sys.stdout.flush()
                else:
                    view.show(dict(event))
            outcome = await handle.wait()
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
    return outcome.exit_code
