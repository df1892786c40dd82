"""``baton model-server``: serve a scenario on loopback until SIGINT or SIGTERM."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Annotated

import typer

from baton.cli._app import app
from baton.errors import BatonError

__all__ = ["model_server"]


@app.command("model-server")
def model_server(
    scenario: Annotated[
        str, typer.Option("--scenario", "-s", help="Scenario name (see `--list`).", show_default=False)
    ] = "plain",
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1; 0 picks a free one.")] = 0,
    list_only: Annotated[bool, typer.Option("--list", help="List the scenarios and exit.")] = False,
) -> None:
    """Serve a scripted model (Anthropic Messages API); prints the base URL on stdout."""
    from baton.testing import ScriptedModelServer, list_scenarios, load_scenario  # YAML: only when serving

    if list_only:
        for name in list_scenarios():
            typer.echo(f"{name}\t{load_scenario(name).description}")
        return
    try:
        server = ScriptedModelServer(scenario, port=port)
    except BatonError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from exc
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with server:
            typer.echo(server.base_url)
            stop.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
