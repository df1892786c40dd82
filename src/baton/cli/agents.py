"""``baton agents [NAME] [--json]``: the agents baton knows, whether they are installed, their modes.

Without a name, one line per agent (installed, version, the baton modes it can be held to);
``baton agents NAME`` shows one agent's native settings: what reaches baton's Gatekeeper under
each, what the agent does without asking, and the test that proves it. Both fit 80 columns.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.errors import BatonError

__all__ = ["agents_command"]


@app.command("agents")
def agents_command(
    name: Annotated[str | None, typer.Argument(help="One agent: its native settings in full.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON array of agent objects.")] = False,
) -> None:
    """List the agents baton can run and the modes each can be held to (NAME: its mode matrix), and
    whether they run contained (``containment_unavailable`` where bubblewrap cannot)."""
    from baton.agents.registry import AGENTS, get_agent
    from baton.sandbox.bwrap import containment

    try:
        entries = [get_agent(name)] if name is not None else list(AGENTS.values())
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output)) from None
    contained = containment().describe()
    described: list[dict[str, Any]] = [{**entry.describe(), "containment": contained} for entry in entries]
    if json_output:
        sys.stdout.write(json.dumps(described[0] if name is not None else described, indent=1) + "\n")
        return
    console = Console(highlight=False)
    if contained["available"]:
        note = f"every agent runs contained: a PID namespace of its own (bubblewrap {contained['version']})"
    else:
        note = f"{contained['code']}: {contained['reason']}; agents get a death signal each (best effort)"
    if name is None:
        _overview(console, described, note)
    else:
        _details(console, described[0])
        console.print(f"\n{escape(note)}")


def _overview(console: Console, agents: list[dict[str, Any]], note: str) -> None:
    rows = [("agent", "installed", "version", "modes it can be held to")]
    rows += [(a["name"], _installed(a), _version(a), _modes(a["modes"])) for a in agents]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    for number, row in enumerate(rows):
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[3]
        console.print(f"[bold]{escape(line)}[/]" if number == 0 else escape(line), soft_wrap=True)
    console.print(f"\n{escape(note)}")
    editors = ", ".join(a["name"] for a in agents if a["applies_edits"]) or "none"
    console.print(f"edited approvals are run by: {escape(editors)} (the others refuse them: edit_not_supported)")
    console.print("[dim]Modes with no rules. baton agents NAME: what it does unasked, and the evidence.[/]")


def _details(console: Console, agent: dict[str, Any]) -> None:
    console.print(f"[bold]{escape(agent['name'])}[/] · {_installed(agent)} · {escape(str(agent['version'] or '-'))}")
    if agent["package"]:
        _indented(console, f"package {agent['package']}", 2)
    for mode, native in agent["modes"].items():
        console.print(f"  mode {mode}: {escape(native) if native else '[red]not enforceable[/]'}")
    applied = "runs the edit" if agent["applies_edits"] else "refused (edit_not_supported): approve as proposed"
    _indented(console, f"an approval with an edited input or plan: {applied}", 2)
    for setting in agent["native_settings"]:
        console.print(f"\n[bold]native setting {escape(setting['native'])}[/]")
        _indented(console, setting["setting"], 4)
        console.print("  [dim]reaches the Gatekeeper[/]")
        _indented(console, setting["reaches_gatekeeper"], 4)
        console.print("  [dim]does without asking[/]")
        for probe in setting["unasked"]:
            _indented(console, probe, 6, bullet="- ")
        if not setting["unasked"]:
            console.print("    nothing")
        console.print("  [dim]evidence[/]")
        _indented(console, setting["evidence"], 4)


def _indented(console: Console, text: str, indent: int, bullet: str = "") -> None:
    """``text`` wrapped with a hanging indent (``bullet`` hangs to its left)."""
    lines = Text(text, overflow="fold").wrap(console, max(20, console.width - indent))
    for number, line in enumerate(lines):
        lead = (bullet if number == 0 else "").rjust(len(bullet))
        line.rstrip()
        console.print(Text(" " * (indent - len(bullet)) + lead) + line, soft_wrap=True)


def _installed(agent: dict[str, Any]) -> str:
    return "installed" if agent["installed"] else "not installed (make setup)"


def _version(agent: dict[str, Any]) -> str:
    return str(agent["version"] or "-") if agent["package"] else "bundled"


def _modes(modes: dict[str, str | None]) -> str:
    held = [mode for mode, native in modes.items() if native]
    if len(held) == len(modes):
        return "all"
    return ", ".join(held) if held else "none"
