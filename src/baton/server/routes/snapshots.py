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
from baton.server.state import ServerState, server_state
from baton.snapshots import LocalBlobStore, blob_store_for, shadow_for
from baton.snapshots._git import EMPTY_TREE
from baton.store import RunRecord

__all__ = ["router"]

# Included by the runs router (prefix ``/v1/runs``).
router = APIRouter(prefix="/v1/runs", tags=["snapshots"], responses=AUTH_RESPONSES, route_class=DirectRoute)

_Reader = Annotated[Principal, Depends(with_scope("runs:read"))]
_SNAPSHOT_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "run_not_found, snapshot_not_found"},
}


async def _snapshots(state: ServerState, record: RunRecord) -> list[dict[str, Any]]:
    """The run's snapshots: the store's records, else the shadow repository's (as the CLI reads them)."""
    found = await state.baton.store.list_snapshots(record.id)
    if found:
        return found
    shadow = shadow_for(state.settings.run_dir(record.id), Path(record.repo or record.cwd or "."))
    from_shadow = await asyncio.to_thread(shadow.snapshots)
    return [{"run_id": record.id, **snapshot} for snapshot in from_shadow]


def _pick(found: list[dict[str, Any]], run_id: str, snapshot_id: str) -> dict[str, Any]:
    for snapshot in found:
        if snapshot["id"] == snapshot_id:
            return snapshot
    raise NotFoundError("snapshot_not_found", f"run {run_id} has no snapshot {snapshot_id}")


@router.get("/{run_id}/snapshots", response_model=SnapshotList, responses=NOT_FOUND)
async def list_snapshots(run_id: str, request: Request, principal: _Reader) -> SnapshotList:
    """The run's snapshots, oldest first."""
    record = await visible_run(request, principal, run_id)
    found = await _snapshots(server_state(request), record)
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
    state = server_state(request)
    found = await _snapshots(state, record)
    if not found:
        raise NotFoundError("snapshot_not_found", f"run {run_id} has no snapshots")
    target = _pick(found, run_id, to) if to else found[-1]
    if from_ is None or from_ == "base":
        old = str(target.get("base_commit") or EMPTY_TREE)
    elif from_ == "start":
        old = "refs/baton/start"
    else:
        old = str(_pick(found, run_id, from_)["tree_hash"])
    shadow = shadow_for(state.settings.run_dir(record.id), Path(record.repo or record.cwd or "."))
    if not shadow.exists:
        raise NotFoundError("snapshot_not_found", f"the shadow repository of run {run_id} is gone")
    patch = await asyncio.to_thread(shadow.git, "diff", "--no-color", "--binary", "-M", old, str(target["tree_hash"]))
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
    snapshot = _pick(await _snapshots(state, record), run_id, snapshot_id)
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
