"""The published request and response models of baton's HTTP API (they make ``/openapi.json``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Budget",
    "CancelParams",
    "CloseParams",
    "CreateRunRequest",
    "CreateTaskRequest",
    "ErrorBody",
    "ErrorResponse",
    "Health",
    "JsonRpcError",
    "JsonRpcRequest",
    "JsonRpcResponse",
    "PermissionMode",
    "Run",
    "RunList",
    "RunMode",
    "RunStatus",
    "SetPermissionModeParams",
    "Task",
    "UserMessageParams",
]

PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions"]
RunMode = Literal["background", "interactive"]
RunStatus = Literal["queued", "running", "paused", "interrupted", "finished", "failed", "cancelled"]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Budget(_Request):
    usd: float | None = Field(default=None, gt=0, description="Stop (open a resource_limit gate) at this cost.")
    turns: int | None = Field(default=None, gt=0, description="Not supported yet: refused with request_invalid.")
    seconds: float | None = Field(default=None, gt=0, description="Not supported yet: refused with request_invalid.")


class CreateRunRequest(_Request):
    prompt: str | None = Field(default=None, min_length=1, description="What to do; or give task_id.")
    task_id: str | None = Field(default=None, description="A stored task: its prompt and repo are the defaults.")
    repo: str | None = Field(default=None, description="The repository (a directory on the server).")
    agent: str = "claude"
    model: str | None = None
    permission_mode: PermissionMode = "default"
    allow: list[str] = Field(default_factory=list, description="Allow rules, e.g. 'Bash(npm test:*)'.")
    deny: list[str] = Field(default_factory=list, description="Deny rules, e.g. 'Write(secrets/**)'.")
    run_mode: RunMode = "background"
    budget: Budget | None = None


class CreateTaskRequest(_Request):
    prompt: str = Field(min_length=1, description="What to do.")
    repo: str | None = Field(default=None, description="The repository runs of this task use by default.")
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict, description="Anything the caller wants kept with it.")


class Task(BaseModel):
    """What to do; runs name it with ``task_id``."""

    id: str
    prompt: str
    repo: str | None
    title: str | None
    metadata: dict[str, Any]
    created_at: str


class Run(BaseModel):
    """The run object (DESIGN.md "CLI contract"), the same for the CLI's --json and HTTP."""

    id: str
    task_id: str | None
    agent: str
    model: str | None
    permission_mode: str
    run_mode: str
    status: RunStatus
    status_reason: str | None
    created_at: str
    finished_at: str | None
    total_cost_usd: float | None
    repo: str | None


class RunList(BaseModel):
    runs: list[Run]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on the last page.")


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    version: str
    database: Literal["ok", "unreachable"]


class ErrorBody(BaseModel):
    code: str = Field(description="A stable code from DESIGN.md 'Error codes'.")
    message: str
    details: dict[str, Any] | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


# JSON-RPC 2.0 on POST /v1/runs/{id}/command.


class UserMessageParams(_Request):
    content: str = Field(min_length=1)


class CancelParams(_Request):
    reason: str | None = None


class CloseParams(_Request):
    pass


class SetPermissionModeParams(_Request):
    permission_mode: PermissionMode


class JsonRpcRequest(BaseModel):
    jsonrpc: Literal["2.0"]
    id: int | str | None = None
    method: Literal["user_message", "cancel", "close", "set_permission_mode"]
    params: dict[str, Any] | None = None


class JsonRpcError(BaseModel):
    code: int = Field(description="-32700 parse error, -32600, -32601, -32602, -32000 refused (data.code says why).")
    message: str
    data: dict[str, Any] | None = None


class JsonRpcResponse(BaseModel):
    jsonrpc: Literal["2.0"] = "2.0"
    id: int | str | None
    result: dict[str, Any] | None = None
    error: JsonRpcError | None = None
