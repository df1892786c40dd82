"""``POST /v1/runs``, ``GET /v1/runs``, ``GET /v1/runs/{id}``: runs belong to the token's ``sub``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response

from baton.errors import AuthError, UsageError
from baton.mcp import mcp_entry_is_named
from baton.runs.model_source import cassette_path
from baton.runs.queries import RunRecord
from baton.runs.spec import RunSpec
from baton.server.auth import Principal
from baton.server.models import (
    CreateRunRequest,
    ErrorResponse,
    ForkRunRequest,
    Run,
    RunList,
    RunStatus,
    RunSummary,
)
from baton.server.routes._access import (
    AUTH_RESPONSES,
    NOT_FOUND,
    allowed_repository,
    allowed_repository_url,
    require_acting_field,
    visible_run,
    with_scope,
)
from baton.server.routes.tasks import visible_task
from baton.server.routing import DirectRoute
from baton.server.state import server_state
from baton.workspaces.mirror import is_git_url

__all__ = ["router"]

router = APIRouter(prefix="/v1/runs", tags=["runs"], responses=AUTH_RESPONSES, route_class=DirectRoute)

_Reader = Annotated[Principal, Depends(with_scope("runs:read"))]
_Writer = Annotated[Principal, Depends(with_scope("runs:write"))]


def run_object(record: RunRecord) -> Run:
    return Run.model_validate(_run_fields(record))


def _run_fields(record: RunRecord) -> dict[str, Any]:
    # The fields of RunRecord.to_dict(), read directly (dataclasses.asdict deep-copies the row).
    return {**{name: getattr(record, name) for name in _RUN_FIELDS}, **record.public_workspace()}


_RUN_FIELDS = tuple(name for name in Run.model_fields if name not in ("repo", "workspace"))


# First of the routes: they are tried in order, and this is the hottest read.
@router.get("/{run_id}", response_model=Run, responses=NOT_FOUND)
async def get_run(run_id: str, request: Request, principal: _Reader) -> Response:
    """One run."""
    record = await visible_run(request, principal, run_id)
    # The hottest read: the record's own fields as JSON, skipping a validation round trip.
    return JSONResponse(_run_fields(record))


@router.post(
    "",
    status_code=201,
    response_model=Run,
    responses={
        400: {"model": ErrorResponse, "description": "invalid_argument"},
        403: {"model": ErrorResponse, "description": "scope_missing, repository_not_allowed"},
        404: {"model": ErrorResponse, "description": "task_not_found"},
        422: {"model": ErrorResponse, "description": "request_invalid (names the field)"},
        429: {"model": ErrorResponse, "description": "rate_limited"},
    },
)
async def create_run(body: CreateRunRequest, request: Request, principal: _Writer) -> Run:
    """Start a run of an agent on a repository; it executes in this server's process (queued for
    the fleet's workers under ``baton serve --no-execute``)."""
    state = server_state(request)
    state.commands.take(principal.sub)
    if body.permission_mode == "bypassPermissions" and not principal.is_admin:
        raise AuthError("scope_missing", "permission_mode bypassPermissions needs the scope 'admin'")
    prompt, repo = body.prompt, body.repo
    if principal.task_id is not None and body.task_id != principal.task_id:
        raise AuthError("scope_missing", f"this token may start runs of task {principal.task_id} only")
    if principal.run_id is not None:
        raise AuthError("scope_missing", "this token is limited to one run; it starts no other")
    if body.task_id is not None:
        task = await visible_task(state, principal, body.task_id)
        prompt, repo = prompt or task.prompt, repo or task.repo
    if not prompt:
        raise UsageError("request_invalid", "prompt: required (or a task_id whose task has one)")
    if not repo:
        raise UsageError("request_invalid", "repo: required (or a task_id whose task has one)")
    url = allowed_repository_url(repo, state.config, principal) if is_git_url(repo) else None
    _check_sandbox_fields(body, principal)
    _check_mcp_field(body, principal, {server.name for server in state.baton.settings.mcp_servers})
    spec = RunSpec(
        prompt=prompt,
        repo=allowed_repository(repo, state.config, principal) if url is None else Path(),
        repo_url=url,
        workspace=body.workspace,
        base=body.base,
        include_uncommitted=body.include_uncommitted,
        agent=body.agent,
        model=body.model,
        permission_mode=body.permission_mode,
        allow=tuple(body.allow),
        deny=tuple(body.deny),
        budget_usd=body.budget.usd if body.budget else None,
        budget_turns=body.budget.turns if body.budget else None,
        budget_seconds=body.budget.seconds if body.budget else None,
        task_id=body.task_id,
        run_mode=body.run_mode,
        owner=principal.sub,
        record=cassette_path(body.record, state.baton.settings.home) if body.record else None,
        replay=cassette_path(body.replay, state.baton.settings.home) if body.replay else None,
        replay_timing=body.replay_timing,
        sandbox=body.sandbox,
        mount_ro=tuple(body.mount_ro),
        mount_rw=tuple(body.mount_rw),
        allow_net=tuple(body.allow_net),
        mcp=tuple(body.mcp),
        labels=body.labels,
        priority=body.priority,
    )
    if spec.record is not None and spec.replay is not None:
        raise UsageError("invalid_argument", "record and replay are exclusive")
    if not state.config.execute:  # baton serve --no-execute: a worker of the fleet takes it
        queued = await state.baton.queue(spec)
        return run_object(await state.runs.get_run(queued.id))
    handle = await state.baton.start(spec)
    state.handles[handle.run_id] = handle
    return run_object(await state.runs.get_run(handle.run_id))


@router.get("/{run_id}/sandbox", responses=NOT_FOUND)
async def get_run_sandbox(run_id: str, request: Request, principal: _Reader) -> dict[str, Any]:
    """Where the run's agent ran last (its latest ``_baton/sandbox``: mode, containment, paths,
    network rules, bubblewrap version; docs/sandbox.md); ``{"sandbox": null}`` before it started."""
    record = await visible_run(request, principal, run_id)
    return {"run_id": record.id, "sandbox": await server_state(request).runs.last_note(record.id, "_baton/sandbox")}


@router.get("/{run_id}/trace", responses=NOT_FOUND)
async def get_run_trace(run_id: str, request: Request, principal: _Reader) -> dict[str, Any]:
    """The OpenTelemetry trace of the run's latest execution (its latest ``_baton/trace``:
    ``trace_id``, ``span_id``; docs/observability.md); ``{"trace": null}`` when none was exported."""
    record = await visible_run(request, principal, run_id)
    return {"run_id": record.id, "trace": await server_state(request).runs.last_note(record.id, "_baton/trace")}


def _check_sandbox_fields(body: CreateRunRequest, principal: Principal) -> None:
    """A mount, a host or a weaker sandbox widens what the agent reaches on the server: the
    ``admin`` scope only (the server's configured sandbox applies to every run)."""
    if body.sandbox == "none":
        require_acting_field(principal, "sandbox", configured=False, why="'none' shows the agent the whole server")
    for field, values, why in (
        ("mount_ro", body.mount_ro, "a path of the server the agent may read"),
        ("mount_rw", body.mount_rw, "a path of the server the agent may write"),
        ("allow_net", body.allow_net, "a host the agent may reach from the server"),
    ):
        if values:
            require_acting_field(principal, field, configured=False, why=why)


def _check_mcp_field(body: CreateRunRequest, principal: Principal, configured: set[str]) -> None:
    """An MCP server is a command baton runs, or a URL baton reaches, on the server: only the
    servers baton.toml names (``[mcp.NAME]``), unless the caller has the ``admin`` scope."""
    for entry in body.mcp:
        named = mcp_entry_is_named(entry) and entry.strip() in configured
        require_acting_field(
            principal, "mcp", configured=named, why=f"{entry.partition('=')[0]!r} is not a server of baton.toml"
        )


@router.post(
    "/{run_id}/fork",
    status_code=201,
    response_model=Run,
    responses={
        400: {"model": ErrorResponse, "description": "invalid_argument (a turn or seq the run does not have)"},
        403: {"model": ErrorResponse, "description": "scope_missing, repository_not_allowed"},
        404: {"model": ErrorResponse, "description": "run_not_found"},
        409: {"model": ErrorResponse, "description": "workspace_dirty, workspace_busy"},
    },
)
async def fork_run(run_id: str, body: ForkRunRequest, request: Request, principal: _Writer) -> Run:
    """A new run with the conversation of ``run_id`` up to a turn (or log entry) and its snapshot there."""
    state = server_state(request)
    state.commands.take(principal.sub)
    if principal.run_id is not None:
        raise AuthError("scope_missing", "this token is limited to one run; it starts no other")
    original = await visible_run(request, principal, run_id)
    repo = allowed_repository(body.repo, state.config, principal) if body.repo else None
    changes = {"owner": principal.sub}
    handle = await state.baton.fork(
        original.id,
        body.prompt,
        turn=body.turn,
        seq=body.seq,
        repo=repo,
        record=cassette_path(body.record, state.baton.settings.home) if body.record else None,
        **changes,
    )
    state.handles[handle.run_id] = handle
    return run_object(await state.runs.get_run(handle.run_id))


@router.get("", response_model=RunList, responses={422: {"model": ErrorResponse}})
async def list_runs(
    request: Request,
    principal: _Reader,
    status: Annotated[RunStatus | None, Query(description="Only runs with this status.")] = None,
    agent: Annotated[str | None, Query(description="Only runs of this agent.")] = None,
    repo: Annotated[str | None, Query(description="Only runs on this repository (its path as listed).")] = None,
    order: Annotated[Literal["oldest", "newest"], Query(description="oldest (default) or newest first.")] = "oldest",
    summary: Annotated[bool, Query(description="Add summaries: pending gates and tokens of each listed run.")] = False,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page.")] = None,
) -> Response:
    """The caller's runs (every run for admin), oldest first (``order=newest``: newest first)."""
    state = server_state(request)
    records = [
        r
        for r in await state.runs.list_runs(status)
        if principal.may_see(r.id, r.owner, r.task_id)
        and (agent is None or r.agent == agent)
        and (repo is None or r.repo == repo)
    ]
    newest = order == "newest"
    if newest:
        records.reverse()
    start = 0
    if cursor is not None:
        ids = [record.id for record in records]
        if cursor in ids:
            start = ids.index(cursor) + 1
        else:  # the cursor's run is gone or filtered out: continue after it in id order
            start = next(
                (i for i, r in enumerate(records) if (r.id < cursor if newest else r.id > cursor)), len(records)
            )
    page = records[start : start + limit]
    more = start + limit < len(records)
    listed = RunList(runs=[run_object(r) for r in page], next_cursor=page[-1].id if more and page else None)
    if not summary:  # the list as it always was, without the key
        return JSONResponse(listed.model_dump(exclude={"summaries"}))
    found = await state.baton.store.run_summaries([record.id for record in page])
    listed.summaries = {run_id: RunSummary.model_validate(values) for run_id, values in found.items()}
    return JSONResponse(listed.model_dump())
