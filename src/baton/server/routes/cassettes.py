"""A run's cassette: ``GET /v1/runs/{id}/cassette``, the file a recorded or replayed run's model
traffic is in (docs/scenarios.md), as ``baton record-scenario RUN --as cassette`` writes it.
Scope ``runs:read``: the run's owner or an admin (another owner's run is ``run_not_found``); a
run whose model answers were not kept is ``run_not_recorded``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse, Response

from baton.server.auth import Principal
from baton.server.models import ErrorResponse
from baton.server.routes._access import AUTH_RESPONSES, visible_run, with_scope
from baton.server.routing import DirectRoute
from baton.server.state import server_state

__all__ = ["router"]

router = APIRouter(prefix="/v1/runs", tags=["runs"], responses=AUTH_RESPONSES, route_class=DirectRoute)

_Reader = Annotated[Principal, Depends(with_scope("runs:read"))]
_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/jsonl": {}}, "description": "The cassette (JSON Lines, docs/scenarios.md)"},
    404: {"model": ErrorResponse, "description": "run_not_found"},
    409: {"model": ErrorResponse, "description": "run_not_recorded"},
}


@router.get("/{run_id}/cassette", response_class=Response, responses=_RESPONSES)
async def cassette(run_id: str, request: Request, principal: _Reader) -> Response:
    """The cassette the run recorded (``--record``) or replayed (``--replay``)."""
    record = await visible_run(request, principal, run_id)
    path = await server_state(request).runs.cassette(record.id)
    return FileResponse(path, media_type="application/jsonl", filename=f"{record.id}.cassette.jsonl")
