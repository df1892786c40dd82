"""``GET /v1/runs/{id}/events``: the run's runner events (or log entries) as server-sent events.

``id:`` is the event's seq (``view=events``) or the entry's seq (``view=acp``); ``event:`` is
the event's type (``entry`` for log entries). A client resumes after ``Last-Event-ID`` (or
``?after=N``): what is stored is replayed, then live entries follow as they are committed,
with no gap and no duplicate at the seam (``SessionLog.subscribe``). A run executed by
another process is tailed by polling the store. The stream closes after a run's last event.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Depends, Header, Query, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from baton.errors import UsageError
from baton.events.entry import LogEntry
from baton.events.project import Projector
from baton.server.auth import Principal
from baton.server.routes._access import AUTH_RESPONSES, NOT_FOUND, visible_run, with_scope
from baton.server.routing import DirectRoute
from baton.server.sse import EventStream, Frame
from baton.server.state import ServerState, server_state

__all__ = ["SSE_RESPONSES", "StreamResponse", "View", "event_stream", "resume_point", "router", "run_entries"]

router = APIRouter(prefix="/v1/runs", tags=["events"], responses=AUTH_RESPONSES, route_class=DirectRoute)

_POLL_SECONDS: Final = 0.2

View = Literal["events", "acp"]
SSE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "Server-sent events; see docs/server.md"},
}


class StreamResponse(Response):
    """Hands the connection to an :class:`EventStream` (FastAPI wants a Response)."""

    def __init__(self, stream: EventStream, release: Callable[[], None]) -> None:
        super().__init__(media_type="text/event-stream")
        self._stream = stream
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._stream(scope, receive, send)
        finally:
            self._release()


def resume_point(last_event_id: str | None, after: int | None) -> int:
    if last_event_id is not None:
        try:
            value = int(last_event_id.strip())
        except ValueError:
            raise UsageError("request_invalid", "Last-Event-ID: must be an event id (an integer)") from None
        if value < 0:
            raise UsageError("request_invalid", "Last-Event-ID: must not be negative")
        return value
    return after or 0


@router.get(
    "/{run_id}/events",
    responses={**NOT_FOUND, **SSE_RESPONSES},
    response_class=Response,
)
async def run_events(
    run_id: str,
    request: Request,
    principal: Annotated[Principal, Depends(with_scope("runs:read"))],
    view: Annotated[View, Query(description="Runner events, or every log entry.")] = "events",
    after: Annotated[int | None, Query(ge=0, description="Start after this id (Last-Event-ID wins).")] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> Response:
    """Stream the run live; resumable with ``Last-Event-ID``."""
    record = await visible_run(request, principal, run_id)
    return event_stream(server_state(request), principal, record.id, view, resume_point(last_event_id, after))


def event_stream(state: ServerState, principal: Principal, run_id: str, view: View, start: int) -> Response:
    """The SSE response for a run the caller may see, from the first id after ``start``."""

    def source() -> AsyncGenerator[Frame, None]:
        if view == "acp":
            return _entry_frames(state, run_id, start)
        return _event_frames(state, run_id, start)

    config = state.config
    stream = EventStream(
        source,
        queue_size=config.sse_queue_size,
        stall_seconds=config.sse_stall_seconds,
        heartbeat_seconds=config.sse_heartbeat_seconds,
        stats=state.streams,
        draining=state.draining,
    )
    return StreamResponse(stream, state.stream_slots.acquire(run_id, principal.sub))


def _entry_frames(state: ServerState, run_id: str, after: int) -> AsyncGenerator[Frame, None]:
    # One reader of the run's log for all its view=acp streams (one subscription, one store tail).
    return state.feeds.frames(run_id, "acp", after, lambda start: _read_entries(state, run_id, start), from_start=False)


def _event_frames(state: ServerState, run_id: str, after: int) -> AsyncGenerator[Frame, None]:
    # Event seqs are a fold over the whole log: one projection per run, shared by its streams.
    return state.feeds.frames(run_id, "events", after, lambda _start: _project(state, run_id), from_start=True)


async def _read_entries(state: ServerState, run_id: str, after: int) -> AsyncGenerator[Frame, None]:
    frames = state.frames
    async with aclosing(run_entries(state, run_id, after)) as entries:
        async for entry in entries:
            yield Frame(entry["seq"], frames.frame(run_id, "acp", entry["seq"], "entry", entry))


async def _project(state: ServerState, run_id: str) -> AsyncGenerator[Frame, None]:
    frames = state.frames
    projector = Projector(run_id)
    async with aclosing(run_entries(state, run_id, 0)) as entries:
        async for entry in entries:
            for event in projector.feed(entry):
                seq = event["seq"]
                yield Frame(seq, frames.frame(run_id, "events", seq, event["type"], event))
            if projector.ended:
                return


async def run_entries(state: ServerState, run_id: str, after: int) -> AsyncGenerator[LogEntry, None]:
    """Committed entries after ``after``, live, until the run has ended and its log is read.

    An interrupted run is followed on: another process may take it over (docs/runs.md).
    """
    entries = state.runs.follow_log(run_id, after, through_interruption=True, poll_seconds=_POLL_SECONDS)
    async with aclosing(entries) as following:
        async for entry in following:
            yield entry
