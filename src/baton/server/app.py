"""The FastAPI application: ``create_app(settings, config)``; its lifespan owns a ``Baton``.

Runs started here execute in this process through the :class:`~baton.runs.Baton` API — or, with
``ServerConfig.execute`` False (``baton serve --no-execute``), are queued for the fleet's workers
(docs/fleet.md); event streams read the session log (the store, for runs executed elsewhere).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig

import baton
from baton import web
from baton.config import Settings
from baton.errors import UsageError
from baton.runs.fleet import require_postgres
from baton.server.auth import Authenticator, JwtAuthenticator, LocalTokenAuthenticator, ensure_local_token
from baton.server.auth import load_public_keys as load_keys
from baton.server.config import ServerConfig
from baton.server.errors import install_error_handlers
from baton.server.limits import BodyLimit, RateLimiter, StreamSlots
from baton.server.routes import (
    cassettes,
    commands,
    events,
    gates,
    health,
    metrics,
    results,
    runs,
    session,
    snapshots,
    tasks,
)
from baton.server.routing import add_routers
from baton.server.sessions import Sessions
from baton.server.sse import StreamStats
from baton.server.state import ServerState

__all__ = ["authenticator_for", "create_app", "http_telemetry"]


def authenticator_for(
    settings: Settings, config: ServerConfig, *, audience: str | None = None
) -> tuple[Authenticator, str | None]:
    """JWTs for ``audience`` (default ``jwt_audience``) with keys; else the local token (and loopback only)."""
    if not config.jwt_public_keys and not config.loopback_only:
        raise UsageError(
            "invalid_argument",
            f"listening on {config.host} needs JWT keys (BATON_JWT_PUBLIC_KEYS); "
            "without keys baton listens on loopback only",
        )
    if config.jwt_public_keys:
        keys = load_keys(config.jwt_public_keys)
        jwt_auth = JwtAuthenticator(
            keys, audience=audience or config.jwt_audience, issuer=config.jwt_issuer, leeway=config.jwt_leeway_seconds
        )
        return jwt_auth, None
    token = ensure_local_token(config.local_token_path(settings))
    return LocalTokenAuthenticator(token), token


def http_telemetry(environ: Mapping[str, str]) -> TelemetryConfig:
    """FastAPI's own OpenTelemetry spans and metrics of requests: on when the environment
    configures an OTLP exporter (any ``OTEL_EXPORTER_OTLP_*``) or FastAPI's auto-configuration.

    Otherwise off: FastAPI would look for configured providers on every request (~5 % of a
    ``GET /v1/runs/{id}``) to find none.
    """
    wanted = environ.get("FASTAPI_OTEL_AUTO_CONFIGURE", "").lower() == "true" or any(
        name.startswith("OTEL_EXPORTER_OTLP_") for name in environ
    )
    return {"tracing": wanted, "metrics": wanted, "logs": wanted}


def create_app(settings: Settings, config: ServerConfig | None = None) -> FastAPI:
    """The application; keys and the local token are checked now, the store opens at startup."""
    config = config or ServerConfig.load(settings)
    if not config.execute:
        require_postgres(settings, "baton serve --no-execute")
    authenticator, local_token = authenticator_for(settings, config)
    draining = asyncio.Event()
    streams = StreamStats()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from baton.notify import Notifier
        from baton.runs import Baton  # imported here: the agents' SDKs are slow to import
        from baton.runs.adoption import Adopter

        async with Baton(settings, metrics=True) as runner:
            if local_token is not None:
                runner.redactor.add(local_token)  # a bearer token never reaches a log
            for webhook in settings.notify_webhooks:  # nor a webhook's secret
                runner.redactor.add(webhook.secret)
            app.state.baton_server = ServerState(
                settings,
                config,
                authenticator,
                runner,
                draining,
                streams,
                StreamSlots(config.sse_max_per_run, config.sse_max_per_token),
                RateLimiter(config.commands_per_minute),
                RateLimiter(config.decisions_per_minute),
                Sessions(authenticator, config.session_seconds),
            )
            # Like `baton worker`: adopt runs whose executor died and which have work (docs/runs.md);
            # not when it executes nothing (the fleet's workers do, docs/fleet.md).
            adopter = Adopter(runner).run(draining) if config.execute else draining.wait()
            adopting = asyncio.create_task(adopter, name="baton-adopter")
            # Webhooks (docs/web.md "Webhooks"): the store's events, whichever process wrote them
            # (returns at once when [notify] lists none).
            notifying = asyncio.create_task(Notifier(runner.store, settings).run(draining), name="baton-notify")
            try:
                yield
            finally:
                draining.set()
                await adopting
                await notifying
                await app.state.baton_server.gate_watch.aclose()

    app = FastAPI(
        title="baton",
        version=baton.__version__,
        summary="Run AI coding agents on tasks in git repositories; every run observable, controllable, durable.",
        lifespan=lifespan,
        telemetry=http_telemetry(os.environ),
    )
    app.state.draining = draining
    app.state.streams = streams
    install_error_handlers(app)
    # Routes are tried in order: GET /v1/runs/{id}, the hottest read, is the first.
    add_routers(
        app,
        runs.router,
        health.router,
        snapshots.router,
        cassettes.router,
        events.router,
        commands.router,
        gates.router,
        tasks.router,
        metrics.router,
        results.router,
        session.router,
        web.router,  # the web app at / (docs/web.md): a client of the routes above
    )
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes, max_header_bytes=config.max_header_bytes)
    return app
