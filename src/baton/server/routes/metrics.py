"""``GET /metrics``: the fleet's metrics in the Prometheus text format (docs/observability.md).

Scope ``metrics:read`` (the local token has it). With ``OTEL_SDK_DISABLED=true`` the body is
empty: a valid exposition with no metric.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from baton.server.auth import Principal
from baton.server.routes._access import AUTH_RESPONSES, with_scope
from baton.server.routing import DirectRoute
from baton.server.state import server_state

__all__ = ["router"]

router = APIRouter(route_class=DirectRoute, responses=AUTH_RESPONSES)


@router.get("/metrics", tags=["server"], response_class=Response)
async def metrics(request: Request, principal: Annotated[Principal, Depends(with_scope("metrics:read"))]) -> Response:
    """Runs, gates, tool calls, tokens, cost and log entries, as Prometheus scrapes them."""
    telemetry = server_state(request).baton.telemetry
    body = await asyncio.to_thread(telemetry.metrics_text) if telemetry is not None else b""
    return Response(body, media_type=CONTENT_TYPE_LATEST)
