"""The application's state: what every request handler needs, built by the lifespan."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastapi import Request

from baton.config import Settings
from baton.server.auth import Authenticator
from baton.server.config import ServerConfig
from baton.server.feeds import SharedFeeds
from baton.server.gate_watch import GateWatch
from baton.server.limits import RateLimiter, StreamSlots
from baton.server.sessions import Sessions
from baton.server.sse import FrameCache, StreamStats

if TYPE_CHECKING:
    from baton.runs import Baton, RunHandle
    from baton.runs.queries import Runs

__all__ = ["ServerState", "server_state"]


@dataclass
class ServerState:
    settings: Settings
    config: ServerConfig
    authenticator: Authenticator
    baton: Baton
    draining: asyncio.Event
    streams: StreamStats
    stream_slots: StreamSlots
    commands: RateLimiter  # run and task creations, commands
    decisions: RateLimiter  # gate decisions, answers, plan reviews, continues
    sessions: Sessions  # the web page's sign-ins (docs/web.md)
    frames: FrameCache = field(default_factory=FrameCache)
    feeds: SharedFeeds = field(default_factory=SharedFeeds)  # one reader per run and view, shared by its streams
    gate_watch: GateWatch = field(default_factory=lambda: GateWatch())  # gate changes for GET /v1/gates/events
    handles: dict[str, RunHandle] = field(default_factory=dict)  # runs executing in this process

    @property
    def runs(self) -> Runs:
        """What every route reads and commands through (the ``Baton``'s queries): one run object everywhere."""
        return self.baton.queries


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.baton_server
    return state
