"""``POST /v1/runs/{id}/command``: JSON-RPC 2.0 commands to a run.

Methods: ``cancel {reason?}``, ``user_message {content}``, ``close {}``,
``set_permission_mode {permission_mode}``. JSON-RPC errors come back with HTTP 200: -32700 a
body that is not JSON, -32600 not a JSON-RPC request, -32601 an unknown method, -32602 bad
params, -32000 refused, with ``data`` the BatonError (``run_not_running``, ``run_not_interactive``,
``run_paused``, ``scope_missing``). Every accepted command goes through
:meth:`baton.runs.queries.Runs.post_command` into the run's durable inbox, which the process executing
the run (this one or another) reads; a ``cancel`` of a parked run, which no process executes,
ends it at once (``{"status": "cancelled"}``: :meth:`baton.runs.queries.Runs.cancel`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError

from baton.errors import AuthError, BatonError
from baton.runs.queries import Runs
from baton.server.auth import Principal
from baton.server.models import (
    CancelParams,
    CloseParams,
    JsonRpcRequest,
    JsonRpcResponse,
    SetPermissionModeParams,
    UserMessageParams,
)
from baton.server.routes._access import AUTH_RESPONSES, NOT_FOUND, visible_run, with_scope
from baton.server.routing import DirectRoute
from baton.server.state import server_state

__all__ = ["answer_command", "router"]

router = APIRouter(prefix="/v1/runs", tags=["commands"], responses=AUTH_RESPONSES, route_class=DirectRoute)

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
REFUSED: Final = -32000

_PARAMS: Final[dict[str, type[BaseModel]]] = {
    "cancel": CancelParams,
    "user_message": UserMessageParams,
    "close": CloseParams,
    "set_permission_mode": SetPermissionModeParams,
}


class _RpcError(Exception):
    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@router.post(
    "/{run_id}/command",
    response_model=JsonRpcResponse,
    responses={**NOT_FOUND, 204: {"description": "A notification (no id): done, no answer"}},
    # The body is read here, not by FastAPI: a body that is not JSON is a JSON-RPC error (-32700).
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": JsonRpcRequest.model_json_schema()}},
        }
    },
)
async def run_command(
    run_id: str,
    request: Request,
    principal: Annotated[Principal, Depends(with_scope("runs:write"))],
) -> Response:
    """Send a JSON-RPC 2.0 command to the run (errors with HTTP 200, as JSON-RPC says)."""
    record = await visible_run(request, principal, run_id)
    state = server_state(request)
    state.commands.take(principal.sub)
    return await answer_command(state.runs, principal, record.id, await request.body())


async def answer_command(runs: Runs, principal: Principal, run_id: str, raw: bytes) -> Response:
    """The JSON-RPC answer to the command ``raw`` for a run the caller may steer."""
    request_id: Any = None
    message: Any = None
    try:
        message = _parse(raw)
        request_id = message.get("id")
        method, params = _method_and_params(message)
        result = await _execute(runs, principal, run_id, method, params)
    except _RpcError as exc:
        error: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            error["data"] = exc.data
        return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error})
    if isinstance(message, dict) and "id" not in message:
        return Response(status_code=204)
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": result})


def _parse(raw: bytes) -> dict[str, Any]:
    try:
        message = json.loads(raw)
    except ValueError:
        raise _RpcError(PARSE_ERROR, "Parse error: the body is not JSON") from None
    if not isinstance(message, dict):
        raise _RpcError(INVALID_REQUEST, "Invalid Request: send one JSON-RPC request object (no batches)")
    request_id = message.get("id")
    if request_id is not None and (isinstance(request_id, bool) or not isinstance(request_id, int | str)):
        raise _RpcError(INVALID_REQUEST, "Invalid Request: id must be a string, a number or null")
    return message


def _method_and_params(message: dict[str, Any]) -> tuple[str, BaseModel]:
    method = message.get("method")
    if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
        raise _RpcError(INVALID_REQUEST, 'Invalid Request: needs "jsonrpc": "2.0" and a "method" string')
    model = _PARAMS.get(method)
    if model is None:
        raise _RpcError(METHOD_NOT_FOUND, f"Method not found: {method!r}", {"methods": sorted(_PARAMS)})
    raw_params = message.get("params", {})
    if raw_params is None:
        raw_params = {}
    if not isinstance(raw_params, dict):
        raise _RpcError(INVALID_PARAMS, "Invalid params: params must be an object")
    try:
        return method, model.model_validate(raw_params)
    except ValidationError as exc:
        errors = [
            {"field": ".".join(str(part) for part in item["loc"]) or "params", "message": item["msg"]}
            for item in exc.errors()
        ]
        first = errors[0]
        text = f"Invalid params: {first['field']}: {first['message']}"
        raise _RpcError(INVALID_PARAMS, text, {"errors": errors}) from None


async def _execute(runs: Runs, principal: Principal, run_id: str, method: str, params: BaseModel) -> dict[str, Any]:
    try:
        bypass = isinstance(params, SetPermissionModeParams) and params.permission_mode == "bypassPermissions"
        if bypass and not principal.is_admin:
            raise AuthError("scope_missing", "switching to bypassPermissions needs the scope 'admin'")
        if isinstance(params, CancelParams):  # a parked run, which nobody executes, ends at once
            return (await runs.cancel(run_id, params.reason)).to_json()
        # The one way a command reaches a run, from any process: its durable inbox.
        inbox_id = await runs.post_command(run_id, method, params.model_dump(exclude_none=True))
    except BatonError as exc:
        raise _RpcError(REFUSED, exc.message, exc.to_dict()) from exc
    return {"status": "queued", "inbox_id": inbox_id}
