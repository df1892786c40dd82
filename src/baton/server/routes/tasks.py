"""``POST /v1/tasks``, ``GET /v1/tasks/{id}``: what to do, stored for runs to name (``task_id``).

A task belongs to the ``sub`` of the token that created it (``tasks.owner``), as a run does;
another owner's task answers exactly like a missing one (404 ``task_not_found``). The owner is
never taken from the request: ``metadata`` is the client's own, stored and shown as given.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from baton.errors import NotFoundError
from baton.runs.queries import TaskRecord
from baton.server.auth import Principal
from baton.server.models import CreateTaskRequest, ErrorResponse, Task
from baton.server.routes._access import AUTH_RESPONSES, allowed_repository, allowed_repository_url, with_scope
from baton.server.routing import DirectRoute
from baton.server.state import ServerState, server_state
from baton.workspaces.mirror import is_git_url

__all__ = ["router", "visible_task"]

router = APIRouter(prefix="/v1/tasks", tags=["tasks"], responses=AUTH_RESPONSES, route_class=DirectRoute)

_TASK_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such task, or not the caller's (task_not_found)", "model": ErrorResponse},
}


def task_object(task: TaskRecord) -> Task:
    return Task(
        id=task.id,
        prompt=task.prompt,
        repo=task.repo,
        title=task.title,
        metadata=task.metadata,
        created_at=task.created_at,
    )


async def visible_task(state: ServerState, principal: Principal, task_id: str) -> TaskRecord:
    """The task if ``principal`` may see it; else ``task_not_found``, exactly as for a missing one."""
    task = await state.runs.get_task(task_id)
    if not principal.may_see_task(task.id, task.owner):
        raise NotFoundError("task_not_found", f"no task {task_id}")
    return task


@router.post(
    "",
    status_code=201,
    response_model=Task,
    responses={
        403: {"model": ErrorResponse, "description": "scope_missing, repository_not_allowed"},
        422: {"model": ErrorResponse, "description": "request_invalid (names the field)"},
        429: {"model": ErrorResponse, "description": "rate_limited"},
    },
)
async def create_task(
    body: CreateTaskRequest, request: Request, principal: Annotated[Principal, Depends(with_scope("runs:write"))]
) -> Task:
    """Store a task; runs started with its ``task_id`` take its prompt and repository."""
    state = server_state(request)
    state.commands.take(principal.sub)
    if principal.task_id is not None or principal.run_id is not None:
        raise NotFoundError("task_not_found", "this token is limited to one run or task; it creates no task")
    repo = body.repo
    if repo is not None:
        checked = (
            allowed_repository_url(repo, state.config, principal)
            if is_git_url(repo)
            else allowed_repository(repo, state.config, principal)
        )
        repo = str(checked)
    task = await state.runs.create_task(
        body.prompt, repo=repo, title=body.title, metadata=body.metadata, owner=principal.sub
    )
    return task_object(task)


@router.get("/{task_id}", response_model=Task, responses=_TASK_NOT_FOUND)
async def get_task(
    task_id: str, request: Request, principal: Annotated[Principal, Depends(with_scope("runs:read"))]
) -> Task:
    """One task."""
    return task_object(await visible_task(server_state(request), principal, task_id))
