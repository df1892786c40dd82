"""A run's snapshots of its working tree: ``GET /v1/runs/{id}/snapshots``,
``GET /v1/runs/{id}/diff?from=&to=`` (a git patch) and
``GET /v1/runs/{id}/snapshots/{snap}/archive`` (the snapshot's tar.gz), as ``baton snapshots``,
``baton diff`` and ``baton snapshot-export`` (docs/snapshots.md). Scope ``runs:read``; another
owner's run is ``run_not_found``.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, Response
from starlette.background import BackgroundTask

from baton.errors import NotFoundError
from baton.server.auth import Principal
from baton.server.models import ErrorResponse, Snapshot, SnapshotList
from baton.server.routes._access import AUTH_RESPONSES, NOT_FOUND, visible_run, with_scope
from baton.server.routing import DirectRoute
from baton.server.state import server_state
from baton.snapshots import LocalBlobStore, blob_store_for

__all__ = ["router"]

# Included by the runs router (prefix ``/v1/runs``).
router = APIRouter(prefix="/v1/runs", tags=["snapshots"], responses=AUTH_RESPONSES, route_class=DirectRoute)

_Reader = Annotated[Principal, Depends(with_scope("runs:read"))]
_SNAPSHOT_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "run_not_found, snapshot_not_found"},
}


@router.get("/{run_id}/snapshots", response_model=SnapshotList, responses=NOT_FOUND)
async def list_snapshots(run_id: str, request: Request, principal: _Reader) -> SnapshotList:
    """The run's snapshots, oldest first."""
    record = await visible_run(request, principal, run_id)
    found = await server_state(request).runs.snapshots(record.id)
    return SnapshotList(snapshots=[Snapshot.model_validate(snapshot) for snapshot in found])


@router.get(
    "/{run_id}/diff",
    response_class=Response,
    responses={
        **_SNAPSHOT_NOT_FOUND,
        200: {"content": {"text/x-diff": {}}, "description": "A git patch (binary-safe, renames detected)"},
    },
)
async def diff(
    run_id: str,
    request: Request,
    principal: _Reader,
    from_: Annotated[
        str | None, Query(alias="from", description="A snapshot id, `base` (the default) or `start`.")
    ] = None,
    to: Annotated[str | None, Query(description="A snapshot id (default: the last one).")] = None,
) -> Response:
    """The changes between two snapshots (by default the base commit → the last snapshot), as a patch."""
    record = await visible_run(request, principal, run_id)
    patch = await server_state(request).runs.diff(record.id, from_, to)
    return Response(patch, media_type="text/x-diff")


@router.get(
    "/{run_id}/snapshots/{snapshot_id}/archive",
    response_class=Response,
    responses={
        **_SNAPSHOT_NOT_FOUND,
        200: {"content": {"application/gzip": {}}, "description": "The snapshot's archive (a gzip pax tar)"},
    },
)
async def archive(run_id: str, snapshot_id: str, request: Request, principal: _Reader) -> Response:
    """The snapshot's archive, as ``baton snapshot-export`` writes it (``baton restore --archive`` reads it)."""
    record = await visible_run(request, principal, run_id)
    state = server_state(request)
    snapshot = await state.runs.snapshot(record.id, snapshot_id)
    key = snapshot.get("archive_key")
    if not key:
        raise NotFoundError("snapshot_not_found", f"snapshot {snapshot_id} of run {run_id} has no archive")
    filename = f"{run_id}-{snapshot_id}.tar.gz"
    blobs = blob_store_for(None, state.settings.home)
    if isinstance(blobs, LocalBlobStore):
        path = blobs.path_of(key)
        if not path.is_file():
            raise NotFoundError("snapshot_not_found", f"the archive of snapshot {snapshot_id} is missing ({key})")
        return FileResponse(path, media_type="application/gzip", filename=filename)
    folder = tempfile.TemporaryDirectory(prefix="baton-archive-")  # a remote store: fetched, sent, removed
    path = Path(folder.name) / "archive.tar.gz"
    try:
        await asyncio.to_thread(blobs.fetch, key, path)
    except BaseException:
        folder.cleanup()
        raise
    cleanup = BackgroundTask(folder.cleanup)
    return FileResponse(path, media_type="application/gzip", filename=filename, background=cleanup)
