"""``baton agents [NAME] [--json]``: the agents baton knows, whether they are installed, their modes,
whether they apply an edited approval."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.errors import BatonError

__all__ = ["agents_command"]


@app.command("agents")
def agents_command(
    name: Annotated[str | None, typer.Argument(help="Only this agent (--json: its object, not an array).")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON array of agent objects.")] = False,
) -> None:
    """List the agents baton can run, with their native permission settings (the mode matrix)."""
    from baton.agents.registry import AGENTS, get_agent

    try:
        entries = [get_agent(name)] if name is not None else list(AGENTS.values())
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    described: list[dict[str, Any]] = [entry.describe() for entry in entries]
    if json_output:
        sys.stdout.write(json.dumps(described[0] if name is not None else described, indent=1) + "\n")
        return
    table = Table("agent", "installed", "version", "native setting", "reaches the Gatekeeper", "runs unasked")
    modes = Table("agent", "baton mode", "native setting")
    edits = Table("agent", "an approval with an edited input or plan")
    for agent in described:
        for mode, native in agent["modes"].items():
            modes.add_row(agent["name"], mode, native or "not enforceable")
        applied = "runs the edit" if agent["applies_edits"] else "refused (edit_not_supported): approve as proposed"
        edits.add_row(agent["name"], applied)
    for agent in described:
        for index, mode in enumerate(agent["native_settings"]):
            first = index == 0
            table.add_row(
                agent["name"] if first else "",
                ("yes" if agent["installed"] else "no (make setup)") if first else "",
                str(agent["version"] or "-") if first else "",
                f"{mode['native']}: {mode['setting']}",
                mode["reaches_gatekeeper"],
                "; ".join(mode["unasked"]) or "nothing",
            )
    console = Console(highlight=False)
    console.print(table)
    console.print(modes)
    console.print(edits)
