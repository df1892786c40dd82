"""``GET /health``: no authentication; is the server up and its database reachable."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

import baton
from baton.server.models import Health
from baton.server.routing import DirectRoute
from baton.server.state import server_state

__all__ = ["database_reachable", "router"]

router = APIRouter(route_class=DirectRoute)


def _ping(engine: Engine) -> bool:
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError:
        return False
    return True


async def database_reachable(engine: Engine) -> bool:
    """Whether the database answers a ``SELECT 1``."""
    return await asyncio.to_thread(_ping, engine)


@router.get("/health", response_model=Health, tags=["server"])
async def health(request: Request) -> Health:
    """Status, version and whether the database answers."""
    reachable = await database_reachable(server_state(request).baton.store.engine)
    return Health(
        status="ok" if reachable else "degraded",
        version=baton.__version__,
        database="ok" if reachable else "unreachable",
    )
