"""``baton acp [--agent NAME]``: serve baton as an ACP agent on stdio (for editors)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError

__all__ = ["acp_command"]


@app.command("acp")
def acp_command(
    agent: Annotated[str, typer.Option("--agent", help="The agent behind baton (default: baton's Claude adapter).")] = (
        "claude"
    ),
    model: Annotated[str | None, typer.Option("--model", help="The model the agent uses.")] = None,
    mode: Annotated[
        str, typer.Option("--mode", help="Permission mode: default, acceptEdits, plan, bypassPermissions.")
    ] = "default",
    allow: Annotated[list[str] | None, typer.Option("--allow", help="Allow rule, e.g. 'Bash(npm test:*)'.")] = None,
    deny: Annotated[list[str] | None, typer.Option("--deny", help="Deny rule, e.g. 'Write(secrets/**)'.")] = None,
) -> None:
    """Speak ACP on stdin/stdout as an agent; an editor session is one interactive baton run whose
    turns are the prompts (log, policy, events), and can be loaded or resumed by a later process.

    Permissions the policy says to ask about are asked of the editor. stdout carries only ACP.
    """
    from baton.acp_server import AcpServerOptions, serve_stdio

    options = AcpServerOptions(
        agent=agent, model=model, permission_mode=mode, allow=tuple(allow or ()), deny=tuple(deny or ())
    )
    try:
        asyncio.run(serve_stdio(Settings.load(), options))
    except BatonError as exc:
        raise typer.Exit(report_error(exc, json_output=False)) from exc
    except KeyboardInterrupt:
        pass
