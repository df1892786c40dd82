"""Who may do what: the caller's principal, its scopes, and the runs it may see."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.openapi.models import HTTPBearer as HTTPBearerModel
from fastapi.security.base import SecurityBase

from baton.errors import AuthError, BatonError, NotFoundError, RefusedError, UsageError
from baton.runs.queries import RunRecord
from baton.server.auth import Principal
from baton.server.config import ServerConfig
from baton.server.models import ErrorResponse
from baton.server.sessions import COOKIE
from baton.server.state import server_state

__all__ = ["AUTH_RESPONSES", "NOT_FOUND", "allowed_repository", "allowed_repository_url", "visible_run", "with_scope"]

AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid token (token_* codes)", "model": ErrorResponse},
    403: {"description": "The token lacks a scope (scope_missing)", "model": ErrorResponse},
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such run, or not the caller's (run_not_found)", "model": ErrorResponse},
}


class _Bearer(SecurityBase):
    """The dependency of every authenticated route: the caller, which must hold ``scope``.

    One flat dependency (FastAPI solves each level of a dependency tree at some cost per
    request): it reads the header itself, so that a missing or non-Bearer header gets its own
    code, and it is the ``HTTPBearer`` security scheme of the OpenAPI document.
    """

    def __init__(self, scope: str) -> None:
        self.model = HTTPBearerModel(description="An RS256 JWT, or the local token (`baton token`)")
        self.scheme_name = "HTTPBearer"
        self.scope = scope

    # A coroutine: FastAPI runs a plain function in a worker thread (~0.1 ms).
    async def __call__(self, request: Request) -> Principal:
        state = server_state(request)
        authorization = request.headers.get("authorization")
        if authorization is None and COOKIE in request.cookies:  # the web page's session (docs/web.md)
            principal = state.sessions.authenticate(request)
        else:
            principal = state.authenticator.authenticate(authorization)
        principal.require(self.scope)
        return principal


def with_scope(scope: str) -> Callable[[Request], Awaitable[Principal]]:
    """A dependency: the authenticated caller, which must hold ``scope``."""
    return _Bearer(scope)


async def visible_run(request: Request, principal: Principal, run_id: str) -> RunRecord:
    """The run (its effective status) if ``principal`` may see it; else ``run_not_found``, as for a missing run."""
    record = await server_state(request).runs.get_run(run_id)
    if not principal.may_see(record.id, record.owner, record.task_id):
        raise NotFoundError("run_not_found", f"no run {run_id}")
    return record


def require_acting_field(
    principal: Principal | None, field: str, *, configured: bool, why: str, refusal: BatonError | None = None
) -> None:
    """The one rule for a request field that runs or reads something on the server (a path, a
    URL, a mount, a host, a sandbox mode): allowed when the server's configuration allows it
    (``configured``), else only with the ``admin`` scope — else ``refusal``, by default
    ``scope_missing`` naming the field and ``why``. A value any token could give would be an escape."""
    if configured or (principal is not None and principal.is_admin):
        return
    raise refusal or AuthError(
        "scope_missing", f"{field}: {why}; unless the configuration allows it, it needs the scope 'admin'"
    )


def allowed_repository(repo: str, config: ServerConfig, principal: Principal | None = None) -> Path:
    """``repo`` resolved, if it is under a workspace root (``BATON_WORKSPACE_ROOTS``), or for
    the ``admin`` scope (:func:`require_acting_field`).

    Unset roots allow any folder on a loopback-only server and none otherwise.
    """
    path = Path(repo)
    if not path.is_absolute():
        raise UsageError("request_invalid", "repo: must be an absolute path on the server")
    try:
        resolved = path.resolve()
    except (OSError, ValueError) as exc:  # a NUL byte, a loop of links
        raise UsageError("request_invalid", f"repo: not a usable path: {exc}") from None
    roots = config.workspace_roots
    if roots is None:
        if config.loopback_only:
            return resolved
        roots = ()
    require_acting_field(
        principal,
        "repo",
        configured=any(resolved.is_relative_to(root.resolve()) for root in roots),
        why="a folder of the server",
        refusal=RefusedError("repository_not_allowed", f"{repo} is not under a workspace root (BATON_WORKSPACE_ROOTS)"),
    )
    return resolved


def allowed_repository_url(url: str, config: ServerConfig, principal: Principal | None = None) -> str:
    """``url`` (a git URL to clone) if the server accepts it: any on a loopback-only server
    without ``BATON_REPOSITORY_URLS``, else one that starts with a listed prefix; any for the
    ``admin`` scope (:func:`require_acting_field`)."""
    allowed = config.repository_urls
    if allowed is None:
        if config.loopback_only:
            return url
        allowed = ()
    require_acting_field(
        principal,
        "repo",
        configured=any(url.startswith(prefix) for prefix in allowed),
        why="a URL the server clones",
        refusal=RefusedError(
            "repository_not_allowed", f"{url} is not an allowed repository URL (BATON_REPOSITORY_URLS)"
        ),
    )
    return url
