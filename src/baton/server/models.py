"""The published request and response models of baton's HTTP API (they make ``/openapi.json``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AnswerRequest",
    "Budget",
    "CancelParams",
    "CloseParams",
    "ContinueRequest",
    "CreateRunRequest",
    "CreateTaskRequest",
    "DecideRequest",
    "ErrorBody",
    "ErrorResponse",
    "Gate",
    "GateAnswer",
    "GateBudget",
    "GateKind",
    "GateList",
    "GateStatus",
    "Health",
    "JsonRpcError",
    "JsonRpcRequest",
    "JsonRpcResponse",
    "PermissionMode",
    "PlanReviewRequest",
    "Run",
    "RunList",
    "RunMode",
    "RunStatus",
    "RunSummary",
    "Session",
    "SetPermissionModeParams",
    "SignInRequest",
    "Snapshot",
    "SnapshotList",
    "Task",
    "UserMessageParams",
    "Workspace",
]

PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions"]
RunMode = Literal["background", "interactive"]
RunStatus = Literal["queued", "running", "paused", "interrupted", "finished", "failed", "cancelled"]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Budget(_Request):
    usd: float | None = Field(default=None, gt=0, description="Stop (open a resource_limit gate) at this cost.")
    turns: int | None = Field(default=None, gt=0, description="Open a resource_limit gate after this many model turns.")
    seconds: float | None = Field(
        default=None, gt=0, description="Open a resource_limit gate once the turns took this long."
    )


class CreateRunRequest(_Request):
    prompt: str | None = Field(default=None, min_length=1, description="What to do; or give task_id.")
    task_id: str | None = Field(default=None, description="A stored task: its prompt and repo are the defaults.")
    repo: str | None = Field(
        default=None, description="The repository: a directory on the server, or a git URL the server allows."
    )
    agent: str = "claude"
    model: str | None = None
    permission_mode: PermissionMode = "default"
    allow: list[str] = Field(default_factory=list, description="Allow rules, e.g. 'Bash(npm test:*)'.")
    deny: list[str] = Field(default_factory=list, description="Deny rules, e.g. 'Write(secrets/**)'.")
    run_mode: RunMode = "background"
    budget: Budget | None = None
    workspace: Literal["worktree", "clone", "in-place"] | None = Field(
        default=None, description="Where the run works; default: a worktree of a local git repository."
    )
    base: str | None = Field(default=None, description="The commit (or branch, tag) the worktree or clone starts at.")
    include_uncommitted: bool = Field(
        default=False, description="Carry the repository's staged, unstaged and new files into the worktree."
    )
    record: str | None = Field(
        default=None, description="Record the model traffic to this cassette in BATON_HOME/cassettes."
    )
    replay: str | None = Field(
        default=None, description="Answer from this cassette in BATON_HOME/cassettes (no model)."
    )
    replay_timing: Literal["real", "fast"] = "fast"
    sandbox: Literal["bwrap", "none"] | None = Field(
        default=None, description="Where the agent runs (docs/sandbox.md); 'none' needs the scope 'admin'."
    )
    mount_ro: list[str] = Field(default_factory=list, description="Paths the agent may read (scope 'admin').")
    mount_rw: list[str] = Field(default_factory=list, description="Paths the agent may write (scope 'admin').")
    allow_net: list[str] = Field(
        default_factory=list, description="Hosts the sandboxed agent may reach, HOST[:PORT] (scope 'admin')."
    )
    mcp: list[str] = Field(
        default_factory=list,
        description=(
            "The run's MCP servers: NAME of a server in baton.toml ([mcp.NAME]); NAME=URL or NAME=COMMAND "
            "(baton runs it on the server) need the scope 'admin'."
        ),
    )
    priority: int | None = Field(
        default=None,
        description=(
            "A fleet run's place on the queue (baton serve --no-execute): 1 (dequeued first) to 2147483647; "
            "default 100. invalid_priority otherwise."
        ),
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description=(
            'A fleet run\'s labels, e.g. {"gpu": "yes"}: only a worker started with them (baton worker --labels) '
            "takes it. At most 6; names and values of letters, digits, '.', '_', '-'. invalid_labels otherwise."
        ),
    )


class ForkRunRequest(_Request):
    prompt: str | None = Field(
        default=None, min_length=1, description="What to tell the agent after the kept conversation."
    )
    turn: int | None = Field(default=None, ge=1, description="Keep the conversation through this turn.")
    seq: int | None = Field(default=None, ge=1, description="Keep the log through this entry.")
    repo: str | None = Field(default=None, description="The fork's working tree (default: the original's).")
    record: str | None = Field(default=None, description="Record the fork's model traffic (in BATON_HOME/cassettes).")


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


class Snapshot(BaseModel):
    """A snapshot of the run's working tree (docs/design.md "CLI contract"; docs/snapshots.md)."""

    id: str
    run_id: str
    tree_hash: str
    base_commit: str | None = None
    added: list[str] = Field(default_factory=list)
    modified: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    renamed: list[Any] = Field(default_factory=list)
    skipped: list[Any] = Field(default_factory=list)
    log_seq_from: int | None = None
    log_seq_to: int | None = None
    archive_key: str | None = None
    created_at: str | None = None


class SnapshotList(BaseModel):
    snapshots: list[Snapshot]


class Workspace(BaseModel):
    """Where a run worked and the branch it left (docs/workspaces.md)."""

    kind: Literal["worktree", "clone", "in-place"]
    path: str | None
    base_commit: str | None
    branch: str | None = Field(description="The branch baton made of the run's result; null before one is made.")
    head_commit: str | None = Field(description="That branch's commit.")
    pull_request_url: str | None = Field(description="The URL result.on_branch printed last.")


class Run(BaseModel):
    """The run object (docs/design.md "CLI contract"), the same for the CLI's --json and HTTP."""

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
    error_code: str | None = Field(default=None, description="A failed run's error code (clone_failed …).")
    error_message: str | None = Field(default=None, description="A failed run's message (git's words for a clone).")
    repo: str | None = Field(description="The user's repository: a path, or the URL a clone was made from.")
    workspace: Workspace


class BranchRequest(_Request):
    snapshot_id: str | None = Field(default=None, description="The snapshot to commit (default: the last one).")
    name: str | None = Field(default=None, description="The branch's name (default: baton/<short run id>).")


class PushRequest(_Request):
    remote: str | None = Field(default=None, description="The remote to push to (default: origin).")


class MergeRequest(_Request):
    into: str | None = Field(default=None, description="The branch to merge into (default: the checked-out one).")


class BranchResult(BaseModel):
    """What POST /v1/runs/{id}/branch did; ``branch`` null (``reason: no_changes``) when the run changed nothing."""

    run_id: str
    snapshot_id: str | None
    branch: str | None
    reason: str | None = None
    commit: str | None = None
    base: str | None = None
    files_changed: int | None = None
    insertions: int | None = None
    deletions: int | None = None
    skipped: list[dict[str, str]] = Field(
        default_factory=list, description="Files the snapshots left out: path, reason."
    )
    pushed_to: str | None = None
    push_error: dict[str, Any] | None = Field(default=None, description="{code, message} when the push failed.")
    pull_request_url: str | None = None


class RunResult(BaseModel):
    """A run's ``result``: its branch, where it was pushed and merged, its pull request."""

    model_config = ConfigDict(extra="allow")

    branch: str
    commit: str
    base: str | None
    repository: str
    pushed_to: str | None = None
    merged_into: str | None = None
    pull_request_url: str | None = None


class MergeResult(BaseModel):
    branch: str
    into: str
    kind: Literal["fast-forward", "merge", "up-to-date"]
    before: str = Field(description="The target branch's commit before the merge.")
    commit: str = Field(description="Its commit after.")


class RunSummary(BaseModel):
    """What a list of runs shows beside each run (``GET /v1/runs?summary=true``)."""

    pending_gates: int = Field(description="Gates of the run waiting for a decision.")
    input_tokens: int = Field(description="Input tokens over the run's turns, as its agent reported them.")
    output_tokens: int = Field(description="Output tokens over the run's turns.")
    prompt: str | None = Field(
        default=None,
        description="The first line of what the run was asked (its task's title, else its prompt), "
        "at most 200 characters; null when nothing says.",
    )


class RunList(BaseModel):
    runs: list[Run]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on the last page.")
    summaries: dict[str, RunSummary] | None = Field(
        default=None, description="With ?summary=true: each listed run's summary, by run id."
    )


class Session(BaseModel):
    """A browser session (docs/web.md): who signed in, and the CSRF token its changes must carry."""

    sub: str
    scopes: list[str]
    run_id: str | None = None
    task_id: str | None = None
    csrf_token: str | None = Field(description="Send it as X-CSRF-Token on every change; null for a bearer token.")
    expires_at: str | None = Field(description="When the session ends (UTC); null for a bearer token.")


class SignInRequest(_Request):
    token: str = Field(min_length=1, description="The local token (`baton token`) or an RS256 JWT.")


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    version: str
    database: Literal["ok", "unreachable"]


class ErrorBody(BaseModel):
    code: str = Field(description="A stable code from docs/design.md 'Error codes'.")
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


# Gates (docs/gates.md): POST /v1/gates/{id}/decide|answer|plan-review|continue, GET /v1/gates.

GateKind = Literal["tool", "question", "plan_review", "resource_limit"]
GateStatus = Literal["pending", "approved", "denied", "answered", "expired", "superseded"]


class Gate(BaseModel):
    """The gate object (docs/design.md "CLI contract"), the same for the CLI's --json and HTTP."""

    id: str
    run_id: str
    kind: GateKind
    status: GateStatus
    tool_name: str | None
    tool_call_id: str | None
    bound_call_id: str | None = Field(description="Echo it verbatim in a decision.")
    bound_input_hash: str | None = Field(description="sha256 of the JCS form of the bound input; echo it verbatim.")
    input: dict[str, Any] | None
    questions: list[dict[str, Any]] | None = None
    plan: str | None = None
    summary: str
    created_at: str
    expires_at: str | None
    suggested_rule: str | None = Field(
        default=None, description='The rule approving with remember: "session" would allow (tool gates; null: refused).'
    )
    decision: dict[str, Any] | None = Field(default=None, description="The recorded decision, once decided.")
    decided_by: str | None = None
    decided_at: str | None = None


class GateList(BaseModel):
    gates: list[Gate]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on the last page.")


class DecideRequest(_Request):
    decision: Literal["approve", "deny"]
    bound_call_id: str | None = Field(
        default=None,
        description="The gate's bound_call_id, verbatim (null for a gate without one). "
        "Required to approve; a denial may leave it out.",
    )
    bound_input_hash: str | None = Field(
        default=None,
        description="The gate's bound_input_hash, verbatim (null likewise). "
        "Required to approve; a denial may leave it out.",
    )
    updated_input: dict[str, Any] | None = Field(default=None, description="approve: run this input instead.")
    remember: Literal["session"] | None = Field(
        default=None, description="approve: allow the suggested rule (never the whole tool) for the rest of the run."
    )
    reason: str | None = Field(default=None, description="Kept with the decision; a denial's is shown to the agent.")
    interrupt: bool | None = Field(default=None, description="deny: also end the agent's turn.")


class GateAnswer(_Request):
    header: str = Field(description="The header of the question answered.")
    selected: list[str] = Field(min_length=1, description="Offered option labels (free text where allowed).")
    note: str | None = None


class AnswerRequest(_Request):
    answers: list[GateAnswer] = Field(min_length=1)
    bound_call_id: str
    bound_input_hash: str


class PlanReviewRequest(_Request):
    decision: Literal["approve", "edit", "reject"]
    edited_plan: str | None = Field(default=None, description="Required for edit, refused otherwise.")
    reason: str | None = None


class GateBudget(_Request):
    usd: float | None = Field(default=None, gt=0)
    turns: int | None = Field(default=None, gt=0)
    seconds: float | None = Field(default=None, gt=0)


class ContinueRequest(_Request):
    budget: GateBudget | None = Field(default=None, description="A new budget for the run; the old one otherwise.")
