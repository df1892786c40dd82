"""``baton record-scenario RUN --out FILE [--as cassette|scenario]``: a run made a test (docs/scenarios.md)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError, UsageError
from baton.runs.queries import Runs

if TYPE_CHECKING:
    from baton.runs.record_scenario import RecordedScenario, WrittenAs

__all__ = ["record_scenario_command"]


@app.command("record-scenario")
def record_scenario_command(
    run_id: Annotated[str, typer.Argument(help="The run to make into a test.")],
    out: Annotated[Path, typer.Option("--out", help="The file to write (a cassette .jsonl or a scenario .yaml).")],
    written_as: Annotated[
        str | None,
        typer.Option(
            "--as",
            help="cassette (replay with `baton run --replay FILE`) or scenario (`baton run --scenario FILE`); "
            "default: by FILE's suffix, else the run's cassette, else its scenario.",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite FILE if it exists.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="The result (and errors) as JSON.")] = False,
) -> None:
    """Write a run's model answers as a cassette or a scenario, from its recording or the scenario it ran."""
    try:
        if written_as not in (None, "cassette", "scenario"):
            raise UsageError("invalid_argument", f"--as is cassette or scenario, not {written_as!r}")
        result = asyncio.run(_record(Settings.load(), run_id, out.absolute(), written_as, force))  # type: ignore[arg-type]
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    if json_output:
        sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
        return
    if result.written_as == "cassette":
        detail = f"{result.exchanges} recorded request(s); replay it with `baton run … --replay {result.out}`"
    else:
        detail = f"{result.steps} step(s); run it with `baton run … --scenario {result.out}`"
    sys.stdout.write(f"wrote run {result.run_id} as a {result.written_as} to {result.out}: {detail}\n")


async def _record(
    settings: Settings, run_id: str, out: Path, written_as: WrittenAs | None, force: bool
) -> RecordedScenario:
    async with Runs(settings) as runs:
        return await runs.record_scenario(run_id, out, written_as=written_as, force=force)
