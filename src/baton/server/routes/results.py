"""A run's result as a branch: ``POST /v1/runs/{id}/branch``, ``/push``, ``/merge`` (scope
``runs:write``), as ``baton branch``, ``baton push`` and ``baton merge`` (docs/workspaces.md
"Results"). Another owner's run is ``run_not_found``; a run executing in a live process is
``run_active``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from baton.server.auth import Principal
from baton.server.models import (
    BranchRequest,
    BranchResult,
    ErrorResponse,
    MergeRequest,
    MergeResult,
    PushRequest,
    RunResult,
)
from baton.server.routes._access import AUTH_RESPONSES, visible_run, with_scope
from baton.server.routing import DirectRoute
from baton.server.state import server_state

__all__ = ["router"]

router = APIRouter(prefix="/v1/runs", tags=["results"], responses=AUTH_RESPONSES, route_class=DirectRoute)

_Writer = Annotated[Principal, Depends(with_scope("runs:write"))]


def _errors(not_found: str, refused: str) -> dict[int | str, dict[str, Any]]:
    return {
        400: {"model": ErrorResponse, "description": "invalid_argument"},
        404: {"model": ErrorResponse, "description": not_found},
        409: {"model": ErrorResponse, "description": refused},
        422: {"model": ErrorResponse, "description": "request_invalid (names the field)"},
    }


@router.post(
    "/{run_id}/branch",
    response_model=BranchResult,
    responses=_errors("run_not_found, snapshot_not_found", "run_active, branch_exists, base_commit_missing"),
)
async def make_branch(
    run_id: str, request: Request, principal: _Writer, body: BranchRequest | None = None
) -> BranchResult:
    """Commit the run's last snapshot (or ``snapshot_id``) on its base commit as a new branch."""
    record = await visible_run(request, principal, run_id)
    body = body or BranchRequest()
    made = await server_state(request).runs.branch(record.id, snapshot_id=body.snapshot_id, name=body.name)
    return BranchResult.model_validate(made.to_dict())


@router.post(
    "/{run_id}/push",
    response_model=RunResult,
    responses=_errors("run_not_found, branch_not_found", "run_active, push_failed"),
)
async def push(run_id: str, request: Request, principal: _Writer, body: PushRequest | None = None) -> RunResult:
    """Push the run's branch (then run ``result.on_branch``); the run's result."""
    record = await visible_run(request, principal, run_id)
    result = await server_state(request).runs.push(record.id, (body or PushRequest()).remote)
    return RunResult.model_validate(result)


@router.post(
    "/{run_id}/merge",
    response_model=MergeResult,
    responses=_errors("run_not_found, branch_not_found", "run_active, merge_conflict, workspace_dirty"),
)
async def merge(run_id: str, request: Request, principal: _Writer, body: MergeRequest | None = None) -> MergeResult:
    """Merge the run's branch into ``into`` (default: the branch checked out in its repository)."""
    record = await visible_run(request, principal, run_id)
    merged = await server_state(request).runs.merge(record.id, (body or MergeRequest()).into)
    return MergeResult.model_validate(merged.to_dict())
