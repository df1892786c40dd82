"""``baton agents [--json]``: the agents baton knows, whether they are installed, their modes."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from baton.cli._app import app

__all__ = ["agents_command"]


@app.command("agents")
def agents_command(
    json_output: Annotated[bool, typer.Option("--json", help="One JSON array of agent objects.")] = False,
) -> None:
    """List the agents baton can run, their native permission settings (the mode matrix), and
    whether they run contained (``containment_unavailable`` where bubblewrap cannot)."""
    from baton.agents.registry import AGENTS
    from baton.sandbox.bwrap import containment

    contained = containment().describe()
    described: list[dict[str, Any]] = [{**entry.describe(), "containment": contained} for entry in AGENTS.values()]
    if json_output:
        sys.stdout.write(json.dumps(described, indent=1) + "\n")
        return
    table = Table("agent", "installed", "version", "native setting", "reaches the Gatekeeper", "runs unasked")
    modes = Table("agent", "baton mode", "native setting")
    for agent in described:
        for mode, native in agent["modes"].items():
            modes.add_row(agent["name"], mode, native or "not enforceable")
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
    if contained["available"]:
        console.print(f"every agent runs contained: a PID namespace of its own (bubblewrap {contained['version']})")
    else:
        console.print(f"{contained['code']}: {contained['reason']}; agents get a death signal each (best effort)")
