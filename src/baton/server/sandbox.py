"""``baton agent-server``: one run, executed in this process and served over HTTP (inside a sandbox).

Three endpoints, on the same rules as ``baton serve``:

- ``GET /health`` (no token): version, database, the run's id and status.
- ``GET /events``: the run's events as server-sent events (``?view=``, ``?after=``,
  ``Last-Event-ID``), exactly as ``GET /v1/runs/{id}/events``.
- ``POST /command``: JSON-RPC 2.0 (``user_message``, ``cancel``, ``close``,
  ``set_permission_mode``) through the run's inbox, exactly as ``POST /v1/runs/{id}/command``.

Tokens are RS256 JWTs whose audience is ``sandbox_jwt_audience`` (``baton:sandbox``), or the
local token without keys (loopback only). A token naming a ``run_id`` or ``task_id`` must name
this run's; a run started with an owner is seen only by that ``sub`` (or ``admin``).

:func:`serve_one_run` starts the run before it listens (a refused run never listens), serves
until the run has ended — a parked run keeps it waiting for its decision — and returns the
CLI's exit code of the run's end: 0 finished, 1 failed, 5 cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Final, Literal

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel

import baton
from baton.config import Settings
from baton.errors import NotFoundError
from baton.runs.queries import RunRecord
from baton.runs.spec import RunSpec
from baton.server.app import authenticator_for, http_telemetry
from baton.server.auth import Principal
from baton.server.config import ServerConfig
from baton.server.errors import install_error_handlers
from baton.server.http import BatonServer
from baton.server.limits import BodyLimit, RateLimiter, StreamSlots
from baton.server.models import JsonRpcRequest, JsonRpcResponse, RunStatus
from baton.server.routes._access import AUTH_RESPONSES, with_scope
from baton.server.routes.commands import answer_command
from baton.server.routes.events import SSE_RESPONSES, View, event_stream, resume_point
from baton.server.routing import DirectRoute, add_routers
from baton.server.sessions import Sessions
from baton.server.sse import StreamStats
from baton.server.state import ServerState

if TYPE_CHECKING:
    from baton.runs import Baton, RunHandle

__all__ = ["SandboxHealth", "create_sandbox_app", "sandbox_may_see", "serve_one_run"]

# docs/design.md "CLI contract": the exit status of a run's end.
_EXIT_CODES: Final = {"finished": 0, "failed": 1, "cancelled": 5}
_TERMINAL_POLL_SECONDS: Final = 0.5
_STREAMS_GRACE_SECONDS: Final = 5.0


class SandboxHealth(BaseModel):
    status: Literal["ok", "degraded"]
    version: str
    database: Literal["ok", "unreachable"]
    run_id: str
    run_status: RunStatus | None = None  # None while the database does not answer


def sandbox_may_see(principal: Principal, record: RunRecord) -> bool:
    """The served run, for a token that names it (or names nothing) and is its owner's, if it has one."""
    if principal.run_id is not None and principal.run_id != record.id:
        return False
    if principal.task_id is not None and principal.task_id != record.task_id:
        return False
    return record.owner is None or principal.is_admin or principal.sub == record.owner


def create_sandbox_app(state: ServerState, run_id: str) -> FastAPI:
    """The application serving the one run ``run_id``; ``state`` is ready (its Baton is open)."""
    router = APIRouter(responses=AUTH_RESPONSES, route_class=DirectRoute)
    runs = state.runs

    async def served_run(principal: Principal) -> RunRecord:
        record = await runs.get_run(run_id)
        if not sandbox_may_see(principal, record):
            raise NotFoundError("run_not_found", "this token is not for the run served here")
        return record

    @router.get("/health", response_model=SandboxHealth, tags=["server"])
    async def health() -> SandboxHealth:
        """Version, database and the run's status (no token)."""
        reachable = await state.baton.store.reachable()
        status = (await runs.get_run(run_id)).status if reachable else None
        return SandboxHealth.model_validate(
            {
                "status": "ok" if reachable else "degraded",
                "version": baton.__version__,
                "database": "ok" if reachable else "unreachable",
                "run_id": run_id,
                "run_status": status,
            }
        )

    @router.get("/events", responses=SSE_RESPONSES, response_class=Response, tags=["events"])
    async def events(
        principal: Annotated[Principal, Depends(with_scope("runs:read"))],
        view: Annotated[View, Query(description="Runner events, or every log entry.")] = "events",
        after: Annotated[int | None, Query(ge=0, description="Start after this id (Last-Event-ID wins).")] = None,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> Response:
        """The run's events live; resumable with ``Last-Event-ID``."""
        record = await served_run(principal)
        return event_stream(state, principal, record.id, view, resume_point(last_event_id, after))

    @router.post(
        "/command",
        response_model=JsonRpcResponse,
        responses={204: {"description": "A notification (no id): done, no answer"}},
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": JsonRpcRequest.model_json_schema()}},
            }
        },
        tags=["commands"],
    )
    async def command(request: Request, principal: Annotated[Principal, Depends(with_scope("runs:write"))]) -> Response:
        """A JSON-RPC 2.0 command to the run (errors with HTTP 200)."""
        record = await served_run(principal)
        state.commands.take(principal.sub)
        return await answer_command(runs, principal, record.id, await request.body())

    app = FastAPI(
        title="baton agent-server",
        version=baton.__version__,
        summary="One baton run, served.",
        telemetry=http_telemetry(os.environ),
    )
    app.state.baton_server = state
    app.state.draining = state.draining
    app.state.streams = state.streams
    install_error_handlers(app)
    add_routers(app, router)
    app.add_middleware(BodyLimit, max_bytes=state.config.max_body_bytes, max_header_bytes=state.config.max_header_bytes)
    return app


async def serve_one_run(
    settings: Settings,
    config: ServerConfig,
    spec: RunSpec,
    *,
    announce: Callable[[str, str], None] = lambda url, run_id: None,
) -> int:
    """Start the run, serve it until it has ended, and return its exit code.

    ``spec.prompt`` may be empty when ``spec.task_id`` names a stored task (its prompt is used).
    ``announce(url, run_id)`` is called once the server listens. SIGINT/SIGTERM stop the
    server and cancel the run (exit 5).
    """
    from baton.runs import Baton  # imported here: the agents' SDKs are slow to import

    authenticator, local_token = authenticator_for(settings, config, audience=config.sandbox_jwt_audience)
    async with Baton(settings) as runner:
        if local_token is not None:
            runner.redactor.add(local_token)
        if spec.task_id is not None and not spec.prompt:
            spec = replace(spec, prompt=(await runner.queries.get_task(spec.task_id)).prompt)
        handle = await runner.start(spec)
        state = ServerState(
            settings,
            config,
            authenticator,
            runner,
            asyncio.Event(),
            StreamStats(),
            StreamSlots(config.sse_max_per_run, config.sse_max_per_token),
            RateLimiter(config.commands_per_minute),
            RateLimiter(config.decisions_per_minute),
            Sessions(authenticator, config.session_seconds),
        )
        state.handles[handle.run_id] = handle
        server = BatonServer(
            create_sandbox_app(state, handle.run_id),
            host=config.host,
            port=config.port,
            log_level="warning",
            max_header_bytes=config.max_header_bytes,
        )
        serving = asyncio.create_task(_serve(server), name="baton-agent-server")
        ended = asyncio.create_task(_run_end(runner, handle), name="baton-agent-server-run")
        while not (server.started or serving.done()):  # noqa: ASYNC110  (uvicorn has no "listening" event)
            await asyncio.sleep(0.01)
        if server.started:
            announce(f"http://{config.host}:{server.bound_port}", handle.run_id)
        await asyncio.wait({serving, ended}, return_when=asyncio.FIRST_COMPLETED)
        if not ended.done():  # the server stopped first (a signal, or it could not listen)
            handle.cancel()
            code = await ended
            return code if serving.result() else 1
        code = ended.result()
        await _streams_end(state)
        server.should_exit = True
        await serving
        return code


async def _serve(server: BatonServer) -> bool:
    """Serve until asked to stop; False if the server could not start (uvicorn exits on that)."""
    try:
        await server.serve()
    except SystemExit:
        return False
    return server.started


async def _run_end(runner: Baton, handle: RunHandle) -> int:
    outcome = await handle.wait()
    status: str = outcome.status
    while status not in _EXIT_CODES:  # parked on a gate: the run goes on once it is decided
        await asyncio.sleep(_TERMINAL_POLL_SECONDS)
        status = (await runner.store.get_run(handle.run_id)).status
    return _EXIT_CODES[status]


async def _streams_end(state: ServerState) -> None:
    """Give open event streams a moment to send the run's last events and close by themselves."""
    deadline = time.monotonic() + _STREAMS_GRACE_SECONDS
    with contextlib.suppress(asyncio.CancelledError):
        while state.streams.open and time.monotonic() < deadline:  # noqa: ASYNC110  (they end by themselves)
            await asyncio.sleep(0.02)
