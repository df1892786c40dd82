"""``GET /health``: no authentication; is the server up and its database reachable."""

from __future__ import annotations

from fastapi import APIRouter, Request

import baton
from baton.server.models import Health
from baton.server.routing import DirectRoute
from baton.server.state import server_state

__all__ = ["router"]

router = APIRouter(route_class=DirectRoute)


@router.get("/health", response_model=Health, tags=["server"])
async def health(request: Request) -> Health:
    """Status, version and whether the database answers."""
    reachable = await server_state(request).baton.store.reachable()
    return Health(
        status="ok" if reachable else "degraded",
        version=baton.__version__,
        database="ok" if reachable else "unreachable",
    )
