"""Every error code's HTTP status, in one place, and the handlers that answer with it.

Errors are ``{"error": {"code", "message", "details"?}}`` (docs/design.md "HTTP basics"). A
request FastAPI cannot validate is 422 ``request_invalid`` naming the field; nothing
unexpected ever reaches the client as a stack trace.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from baton.errors import (
    CODES,
    AgentError,
    AuthError,
    BatonError,
    GateError,
    NotFoundError,
    RefusedError,
    UpstreamError,
    UsageError,
    WorkspaceError,
    error_class,
)

__all__ = ["HTTP_STATUS", "error_response", "install_error_handlers", "status_for"]

_log = logging.getLogger("baton.server")

HTTP_STATUS: Final[dict[str, int]] = {
    # 400: the request is understood but not acceptable as given.
    "invalid_argument": 400,
    "config_invalid": 500,
    "webhook_url_invalid": 500,  # the server's own [notify] configuration, like config_invalid
    "webhook_secret_invalid": 500,
    "webhook_event_unknown": 500,
    "request_invalid": 422,
    "cassette_invalid": 400,
    "invalid_labels": 400,  # a fleet run's or worker's labels (docs/fleet.md "Labels")
    "invalid_priority": 400,
    # 401 / 403: who you are, what you may do.
    "token_missing": 401,
    "token_invalid": 401,
    "token_expired": 401,
    "token_not_yet_valid": 401,
    "token_audience": 401,
    "token_algorithm": 401,
    "token_kid": 401,
    "session_expired": 401,
    "scope_missing": 403,
    "csrf_failed": 403,
    "repository_not_allowed": 403,
    "bypass_refused_as_root": 403,
    "net_not_allowed": 403,
    # 404: absent, or not yours (no existence leak).
    "run_not_found": 404,
    "task_not_found": 404,
    "gate_not_found": 404,
    "snapshot_not_found": 404,
    "session_not_found": 404,
    "branch_not_found": 404,
    # 409: the resource is in a state that refuses this.
    "run_active": 409,
    "run_taken_over": 409,
    "run_not_running": 409,
    "run_not_interactive": 409,
    "run_paused": 409,
    "run_ended": 409,
    "run_not_resumable": 409,
    "run_exists": 409,
    "storage_conflict": 409,
    "invalid_transition": 409,
    "base_commit_missing": 409,
    "workspace_busy": 409,
    "workspace_dirty": 409,
    "branch_exists": 409,
    "merge_conflict": 409,
    "push_failed": 409,
    "run_not_recorded": 409,
    "output_exists": 409,
    "fleet_requires_postgres": 409,
    "cassette_exhausted": 409,
    "gate_not_pending": 409,
    "gate_kind_mismatch": 409,
    "gate_not_resumable": 409,
    "gate_ambiguous": 409,
    "approval_binding_mismatch": 409,
    # 422: a well-formed request whose content is refused.
    "answer_invalid": 422,
    "plan_edit_invalid": 422,
    "edit_not_supported": 422,
    "mode_not_enforceable": 422,
    "mcp_not_supported": 422,
    "budget_not_supported": 422,
    "path_outside_workspace": 422,
    "archive_unsafe_entry": 422,
    "archive_corrupt": 422,
    "archive_version_unsupported": 422,
    "workspace_failed": 422,
    "ref_not_found": 422,
    "clone_failed": 422,
    "workspace_setup_failed": 422,
    "branch_not_merged": 409,
    # 413 / 429: limits.
    "body_too_large": 413,
    "headers_too_large": 431,
    "archive_too_large": 413,
    "rate_limited": 429,
    "sse_limit": 429,
    # 5xx: baton or the agent could not do it.
    "model_credentials_missing": 503,
    "agent_not_installed": 503,
    "sandbox_unavailable": 503,
    "storage_unavailable": 503,
    "storage_busy": 503,
    "storage_error": 500,
    "log_write_failed": 500,
    "blob_store_denied": 503,
    "blob_bucket_missing": 503,
    "blob_store_unavailable": 503,
    "blob_store_error": 502,
    "agent_start_timeout": 504,
    "agent_exited": 502,
    "agent_error": 502,
    "budget_exhausted": 409,
    "replay_mismatch": 409,
    "sandbox_network_failed": 502,
    "mcp_server_failed": 502,
    "upstream_unreachable": 502,
    "upstream_tls": 502,
    "upstream_failed": 502,
}

# A code added to the tree before it is added above still gets its family's status
# (tests/server checks that every code is listed).
_FAMILY_STATUS: Final[dict[type[BatonError], int]] = {
    UsageError: 400,
    RefusedError: 409,
    NotFoundError: 404,
    AgentError: 502,
    GateError: 409,
    WorkspaceError: 422,
    AuthError: 401,
    UpstreamError: 502,
}


def status_for(code: str) -> int:
    status = HTTP_STATUS.get(code)
    if status is None:
        status = _FAMILY_STATUS.get(error_class(code), 500) if code in CODES else 500
    return status


def error_response(error: BatonError, headers: dict[str, str] | None = None) -> JSONResponse:
    status = status_for(error.code)
    if isinstance(error, AuthError) and status == 401:
        headers = {"WWW-Authenticate": 'Bearer realm="baton"', **(headers or {})}
    retry_after = error.details.get("retry_after")
    if status == 429 and isinstance(retry_after, int):
        headers = {"Retry-After": str(retry_after), **(headers or {})}
    return JSONResponse({"error": error.to_dict()}, status_code=status, headers=headers)


def _field_name(location: tuple[Any, ...]) -> str:
    parts = [str(part) for part in location if part not in ("body", "query", "path", "header")]
    return ".".join(parts) or str(location[0] if location else "body")


def validation_error(exc: RequestValidationError) -> UsageError:
    problems = []
    for item in exc.errors():
        location = tuple(item.get("loc", ()))
        kind = item.get("type", "")
        field = "body" if kind == "json_invalid" else _field_name(location)
        message = str(item.get("msg", "invalid"))
        if location == ("body",) and kind in ("model_attributes_type", "dict_type", "model_type"):
            message = "must be a JSON object, sent as Content-Type: application/json"
        problems.append({"field": field, "message": message})
    first = problems[0] if problems else {"field": "body", "message": "invalid request"}
    message = f"{first['field']}: {first['message']}"
    return UsageError("request_invalid", message, details={"errors": problems})


async def _baton_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BatonError)
    return error_response(exc)


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(validation_error(exc))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    message = f"no such endpoint: {request.url.path}" if exc.status_code == 404 else str(exc.detail)
    body = {"error": {"code": "request_invalid", "message": message}}
    return JSONResponse(body, status_code=exc.status_code, headers=getattr(exc, "headers", None))


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    _log.exception("unexpected error on %s %s", request.method, request.url.path)
    # Not a BatonError code: a bug of baton's, never a refusal the client could act on.
    body = {"error": {"code": "internal_error", "message": "internal error; see the server's log"}}
    return JSONResponse(body, status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(BatonError, _baton_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
