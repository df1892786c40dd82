"""``baton serve [--host 127.0.0.1] [--port 8080]``: the HTTP server (REST, SSE, JSON-RPC)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from baton.cli._app import app
from baton.cli._errors import report_error
from baton.config import Settings
from baton.errors import BatonError

if TYPE_CHECKING:
    from baton.server.config import ServerConfig

__all__ = ["serve_command"]


@app.command("serve")
def serve_command(
    host: Annotated[str, typer.Option("--host", help="Address; non-loopback needs JWT keys.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0 picks a free one).")] = 8080,
    no_execute: Annotated[
        bool,
        typer.Option(
            "--no-execute", help="Queue runs for the fleet's workers (baton worker); execute none here. Needs Postgres."
        ),
    ] = False,
) -> None:
    """Serve runs over HTTP: REST, live events (SSE), JSON-RPC commands; see docs/server.md."""
    from baton.server import BatonServer, ServerConfig, create_app

    try:
        settings = Settings.load()
        config = ServerConfig.load(settings, host=host, port=port, execute=False if no_execute else None)
        application = create_app(settings, config)
    except BatonError as exc:
        raise typer.Exit(report_error(exc, False)) from None
    if config.jwt_public_keys:
        auth = f"JWT RS256, audience {config.jwt_audience!r}"
    else:
        auth = f"local token in {config.local_token_path(settings)} (`baton token`)"
    role = " — queueing runs for the fleet (--no-execute)" if no_execute else ""
    sys.stderr.write(f"baton serve: http://{host}:{port} — auth: {auth}{role}\n")
    server = BatonServer(application, host=host, port=port, max_header_bytes=config.max_header_bytes)
    server.on_listening = lambda bound: _announce_sign_in(settings, config, host, bound)
    server.run()


def _announce_sign_in(settings: Settings, config: ServerConfig, host: str, port: int) -> None:
    """``Sign in: URL`` on stderr once the socket listens, before the first request is served.

    The local token rides in the URL's fragment (``#token=…``), which a browser never sends:
    it stays out of request lines and access logs; the sign-in page posts it once and drops it.
    """
    from baton.server.auth import ensure_local_token

    address = f"http://{'[' + host + ']' if ':' in host else host}:{port}/login"
    if not config.jwt_public_keys:
        address += "#token=" + ensure_local_token(config.local_token_path(settings))
    sys.stderr.write(f"Sign in: {address}\n")
    sys.stderr.flush()
